#!/usr/bin/env bash
# The demo behind `make demo`: start a host, place 100 orders, approve them,
# and show what duro recorded.  Everything goes through the `duro` CLI, as
# a user would type it.  Takes about 15 seconds (order 7's card fails once
# and is retried after the example's 10-second back-off).
set -euo pipefail
cd "$(dirname "$0")/.."
DURO=./build/host/duro
CFG=config/demo.yaml
N=${DEMO_ORDERS:-100}

mkdir -p var
rm -f var/demo.db var/demo.db-wal var/demo.db-shm
$DURO run "$CFG" 2>var/demo.log &
host=$!
trap 'kill -TERM $host 2>/dev/null; wait $host 2>/dev/null || true' EXIT
for _ in $(seq 100); do grep -q " ready" var/demo.log && break; sleep 0.1; done
grep -q " ready" var/demo.log || { cat var/demo.log; exit 1; }

count() { # how many instances have status $1
  $DURO workflows instances list order-flow --status "$1" --limit 1000 \
    --config "$CFG" | grep -c " $1 " || true
}
wait_for() { # wait until $2 instances have status $1
  for _ in $(seq 600); do [ "$(count "$1")" -ge "$2" ] && return; sleep 0.1; done
  echo "timed out waiting for $2 instances to be $1" >&2; exit 1
}

echo "== placing $N orders"
for i in $(seq "$N"); do
  flaky=false; [ "$i" -eq 7 ] && flaky=true
  $DURO workflows trigger order-flow --config "$CFG" --id "order-$i" \
    "{\"orderId\":\"$i\",\"email\":\"customer$i@example.com\",\"amount\":$i.5,\"graceSeconds\":2,\"flakyCard\":$flaky}" >/dev/null
done
echo "   each reserves stock, charges the card, then waits for a manual review"
wait_for waiting "$N"

echo "== approving them (event \"approval\")"
for i in $(seq "$N"); do
  $DURO workflows instances send-event order-flow "order-$i" --config "$CFG" \
    --type approval --payload '{"approved":true,"by":"demo"}' >/dev/null
done
echo "   each sleeps its 2-second grace period, then sends the mail"
wait_for complete "$N"

echo
echo "== what happened to order-7 (its card failed once)"
$DURO workflows instances describe order-flow order-7 --config "$CFG"
echo
echo "== all orders"
for s in queued running waiting paused errored terminated complete; do
  printf '   %-10s %s\n' "$s" "$(count "$s")"
done
echo
echo "== a few metrics (GET /metrics)"
curl -s http://127.0.0.1:8788/metrics | grep -E '^duro_(steps_completed|retries|activations|events_sent)_total|^duro_journal_commit_seconds_count'
