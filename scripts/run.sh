#!/usr/bin/env bash
# Start the ASGI server and one Celery worker together; Ctrl-C stops both.
set -uo pipefail
cd "$(dirname "$0")/.."

HOST="${CAESURA_HOST:-127.0.0.1}"
PORT="${CAESURA_PORT:-8000}"
BIN=.venv/bin

# solo pool: the model and the paused sessions' state live in this one process.
"$BIN/celery" -A webapp worker --pool=solo --concurrency=1 --loglevel=INFO \
    --hostname="caesura-$$@%h" &
worker=$!
# The web server pools its database connections (webapp/settings.py says why).
CAESURA_DB_POOL_SIZE="${CAESURA_DB_POOL_SIZE:-20}" "$BIN/daphne" -b "$HOST" -p "$PORT" \
    webapp.asgi:application &
web=$!

stop() {
    trap - INT TERM
    echo
    echo "Stopping Caesura ..."
    kill -TERM "$web" "$worker" 2>/dev/null
    wait "$web" "$worker" 2>/dev/null
    exit 0
}
trap stop INT TERM

sleep 2
echo
echo "Caesura is running at http://$HOST:$PORT/  (health: http://$HOST:$PORT/healthz)"
"$BIN/python" -m reviewer.demo.credentials "${CAESURA_DATA_DIR:-var}/demo_credentials.json" \
    "http://$HOST:$PORT"
echo "Press Ctrl-C to stop."

# Either process ending on its own is a failure worth surfacing: stop the other one too.
wait -n "$web" "$worker"
status=$?
echo "A Caesura process exited (status $status); stopping the other." >&2
kill -TERM "$web" "$worker" 2>/dev/null
wait 2>/dev/null
exit "$status"
