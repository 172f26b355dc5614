/* fuzz_http_request.c — libFuzzer target for a whole HTTP/1 request as it
 * arrives on a socket.
 *
 * Each input is the bytes a client sends: the head is parsed the way the
 * server parses it (H2O's picohttpparser, then H2O's path normalization;
 * http_parse_head), and the request, with the bytes after the head as its
 * body, goes through every refusal and route a served request goes
 * through (http_serve) to a real engine.  The server requires the token
 * "fuzz" (the seeds carry "Authorization: Bearer fuzz"). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http_fixture.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  http_server *s = fuzz_http_server("fuzz");
  http_input in;
  http_header headers[HTTP_MAX_HEADERS];
  char *path;
  int head = http_parse_head((const char *)data, size, &in, headers, &path);
  if (head > 0) {
    if ((size_t)head < size) {
      in.body = (const char *)data + head;
      in.body_len = size - (size_t)head;
    }
    http_output out;
    http_serve(s, &in, &out);
    if (out.status < 200 || out.status > 599 || !out.body)
      __builtin_trap();
    http_output_free(&out);
    fuzz_http_settle();
  }
  free(path);
  return 0;
}
