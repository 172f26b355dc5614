// The S3-compatible server's command line (server.sh run): the package
// declares a bin/s3rver.js it does not ship, so its CLI module is run
// from here, with our arguments.
require('@20minutes/s3rver/lib/cli.js').parseAsync(process.argv);
