/* backlog.c — a flow key's waiters in the order of their turns
 * (backlog.h): lanes on a ring, each a list of priority levels (highest
 * first), each level a FIFO.  Lanes and levels exist only while someone
 * waits in them, so a key's memory follows its backlog, not every tenant
 * it ever saw.  Pushing costs a walk of the lane's distinct priorities
 * (a few); taking and removing cost nothing more. */
#include "backlog.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

typedef struct backlog_level {
  struct backlog_level *next; /* the next lower priority */
  struct backlog_lane *lane;
  int64_t priority;
  backlog_waiter *head, *tail;
} backlog_level;

typedef struct backlog_lane {
  struct backlog_lane *chain;       /* the next lane of the same hash */
  struct backlog_lane *prev, *next; /* the ring of lanes with waiters */
  char *value;
  uint32_t weight;
  uint32_t turns_left; /* of its turn now, when it is the current lane */
  backlog_level *levels;
} backlog_lane;

static backlog_lane *lane_find(const backlog *b, const char *value, int64_t h) {
  for (backlog_lane *l = idmap_get(&b->lanes, h); l; l = l->chain)
    if (!strcmp(l->value, value))
      return l;
  return NULL;
}

/* A new lane joins the ring just before the current one: last in this
 * round. */
static backlog_lane *lane_make(backlog *b, const char *value, int64_t h,
                               uint32_t weight) {
  backlog_lane *l = xcalloc(1, sizeof *l);
  l->value = xstrdup(value);
  l->weight = weight ? weight : 1;
  l->chain = idmap_get(&b->lanes, h);
  idmap_put(&b->lanes, h, l);
  if (!b->current) {
    l->prev = l->next = l;
    l->turns_left = l->weight;
    b->current = l;
  } else {
    l->next = b->current;
    l->prev = b->current->prev;
    l->prev->next = l;
    b->current->prev = l;
  }
  return l;
}

/* The next lane's turn begins. */
static void lane_pass(backlog *b) {
  b->current = b->current->next;
  b->current->turns_left = b->current->weight;
}

/* Unlinks an empty lane from the ring and the map, and frees it. */
static void lane_drop(backlog *b, backlog_lane *l) {
  if (l->next == l) {
    b->current = NULL;
  } else {
    if (b->current == l)
      lane_pass(b);
    l->prev->next = l->next;
    l->next->prev = l->prev;
  }
  int64_t h = map_hash_str(l->value);
  backlog_lane *head = idmap_get(&b->lanes, h);
  if (head == l) {
    if (l->chain)
      idmap_put(&b->lanes, h, l->chain);
    else
      idmap_del(&b->lanes, h);
  } else {
    for (backlog_lane *p = head; p; p = p->chain)
      if (p->chain == l) {
        p->chain = l->chain;
        break;
      }
  }
  free(l->value);
  free(l);
}

void backlog_push(backlog *b, backlog_waiter *w, const char *lane,
                  uint32_t weight, int64_t priority) {
  int64_t h = map_hash_str(lane);
  backlog_lane *l = lane_find(b, lane, h);
  if (!l)
    l = lane_make(b, lane, h, weight);
  backlog_level **pp = &l->levels;
  while (*pp && (*pp)->priority > priority)
    pp = &(*pp)->next;
  backlog_level *lv = *pp;
  if (!lv || lv->priority != priority) {
    lv = xcalloc(1, sizeof *lv);
    lv->lane = l;
    lv->priority = priority;
    lv->next = *pp;
    *pp = lv;
  }
  w->level = lv;
  w->next = NULL;
  w->prev = lv->tail;
  if (lv->tail)
    lv->tail->next = w;
  else
    lv->head = w;
  lv->tail = w;
  b->n++;
}

backlog_waiter *backlog_next(const backlog *b) {
  return b->current ? b->current->levels->head : NULL;
}

/* Unlinks w; drops its level and then its lane when they empty.  Whether
 * its lane was dropped. */
static int unlink_waiter(backlog *b, backlog_waiter *w) {
  backlog_level *lv = w->level;
  backlog_lane *l = lv->lane;
  if (w->prev)
    w->prev->next = w->next;
  else
    lv->head = w->next;
  if (w->next)
    w->next->prev = w->prev;
  else
    lv->tail = w->prev;
  w->prev = w->next = NULL;
  w->level = NULL;
  b->n--;
  if (lv->head)
    return 0;
  backlog_level **pp = &l->levels;
  while (*pp != lv)
    pp = &(*pp)->next;
  *pp = lv->next;
  free(lv);
  if (l->levels)
    return 0;
  lane_drop(b, l);
  return 1;
}

backlog_waiter *backlog_take(backlog *b) {
  backlog_waiter *w = backlog_next(b);
  if (!w)
    return NULL;
  backlog_lane *l = b->current;
  if (!unlink_waiter(b, w) && --l->turns_left == 0)
    lane_pass(b);
  return w;
}

void backlog_remove(backlog *b, backlog_waiter *w) {
  if (w->level)
    unlink_waiter(b, w);
}

void backlog_clear(backlog *b, void (*fn)(backlog_waiter *w, void *ctx),
                   void *ctx) {
  while (b->current) {
    backlog_waiter *w = b->current->levels->head;
    unlink_waiter(b, w);
    if (fn)
      fn(w, ctx);
  }
  idmap_free(&b->lanes);
}

int64_t backlog_waiter_priority(const backlog_waiter *w) {
  return w->level->priority;
}

const char *backlog_waiter_lane(const backlog_waiter *w) {
  return w->level->lane->value;
}
