#!/usr/bin/env bash
# Runs the processor, the worker, the API and the demo receiver together in the foreground, each
# line of their logs prefixed with its name, until Ctrl-C (or until one of them
# exits), and then stops them all gracefully.
set -uo pipefail
cd "$(dirname "$0")/.."

pids=()

# prefixed NAME CMD...: start CMD in the background with its output prefixed.
# The prefixer ignores Ctrl-C so that it still prints the shutdown logs.
prefixed() {
	local name=$1
	shift
	"$@" > >(trap '' INT TERM; exec sed -u "s/^/[$name] /") 2>&1 &
	pids+=($!)
}

stop() {
	trap - INT TERM EXIT
	kill -TERM "${pids[@]}" 2>/dev/null
	wait "${pids[@]}" 2>/dev/null
}
trap stop INT TERM EXIT

# A person reads these logs: one line a record, not JSON (LOG_FORMAT=json to
# see what production writes).
export LOG_FORMAT=${LOG_FORMAT:-text}

# The stand-in processor runs only when the service runs against it
# (PROCESSOR=fake, the default); another processor is reached as its own
# settings say (./bin/worker -h lists them).
export PROCESSOR=${PROCESSOR:-fake}
if [ "$PROCESSOR" = fake ]; then
	# The processor's webhooks settle operations: it posts them to the API, signed
	# with a demo secret that the API verifies (use your own outside a demo).
	export PROCESSOR_WEBHOOK_SECRET=${PROCESSOR_WEBHOOK_SECRET:-whsec_ZGVtby1vbmx5LXByb2Nlc3Nvci13ZWJob29rLXNlY3JldA==}
	export PROCESSOR_WEBHOOK_URL=${PROCESSOR_WEBHOOK_URL:-http://localhost${API_ADDR:-:8080}/v1/processor/webhooks}
fi

# River's dashboard on the worker's internal listener, with demo credentials
# as public as the demo API keys (set your own outside a demo).
export RIVER_UI_PASSWORD=${RIVER_UI_PASSWORD:-demo}

if [ "$PROCESSOR" = fake ]; then
	prefixed fakeprocessor ./bin/fakeprocessor
fi
prefixed worker ./bin/worker
prefixed api ./bin/api
# The demo receiver of Acme's webhook endpoint (make seed registered it).
RECEIVER_DEDUPE_FILE=${RECEIVER_DEDUPE_FILE:-bin/demoreceiver-seen.log} prefixed demoreceiver ./bin/demoreceiver
cat <<EOF
[run] API        http://localhost${API_ADDR:-:8080}   (try: curl localhost${API_ADDR:-:8080}/healthz)
[run] API metrics http://localhost${API_INTERNAL_ADDR:-:9090}/metrics   (internal: never on the public port)
[run] worker     http://localhost${METRICS_ADDR:-:9091}/metrics
[run] River UI   http://localhost${METRICS_ADDR:-:9091}/riverui/  (user admin, password demo)
[run] receiver   http://localhost${RECEIVER_ADDR:-:9092}/webhooks   (Acme's webhook endpoint: its [demoreceiver] lines are the events delivered)
[run] traces     ${OTEL_TRACES_EXPORTER:-none}: every log line carries its trace_id; OTEL_TRACES_EXPORTER=console make run prints the spans, =otlp sends them to OTEL_EXPORTER_OTLP_ENDPOINT
[run] demo API keys: sk_test_acme (Acme), sk_test_globex (Globex)
[run] Ctrl-C stops them all
EOF
if [ "$PROCESSOR" = fake ]; then
	echo "[run] processor  http://localhost${PROCESSOR_ADDR:-:8090}   (webhooks to ${PROCESSOR_WEBHOOK_URL}; metrics on localhost${PROCESSOR_INTERNAL_ADDR:-:9093})"
else
	echo "[run] processor  ${PROCESSOR}, as its settings say (./bin/worker -h); its webhooks go to http://localhost${API_ADDR:-:8080}/v1/processor/webhooks"
fi

# Return as soon as any of them exits; the trap stops the others.
wait -n "${pids[@]}"
