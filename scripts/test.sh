#!/usr/bin/env bash
# The test command (`npm test`): makes sure the tools the suite runs for
# real are on this machine, builds, and runs every test. A tool that cannot
# be had fails the run with the reason; no test is skipped for want of it.
#
#   scripts/test.sh                       every test (npm test)
#   scripts/test.sh --unit                the rules alone: test/domain/, test/report/, test/metrics/, test/*.test.ts and test/docs/; no temp
#                                         box, no etcd, no Debian package (npm run test:unit)
#   scripts/test.sh test/domain/fence.test.ts …   the files named, built first (npm test -- FILE …)
set -euo pipefail
cd "$(dirname "$0")/.."

unit=false
named=()
for arg in "$@"; do
  case "$arg" in
    --unit) unit=true ;;
    *.test.ts) named+=("dist/${arg%.ts}.js") ;;
    *)
      echo "test: $arg: name test files as test/…/x.test.ts or bench/…/x.test.ts, or --unit" >&2
      exit 2
      ;;
  esac
done
echo "test: node $(node --version) ($(command -v node))" >&2
# Each test's bound, unless it sets its own ({ timeout } on the test, as the
# restart and crash tests do): a hang fails its test instead of the run, and
# the test's t.after hooks still run to end what it started. 240 s is twice
# what the slowest test without one of its own took (the etcd fleet test,
# 120 s) on a two-core machine under a load average near 20; a test that
# needs more says so where it is. --test-force-exit ends a file's process
# once its tests are done even if something of a timed-out test still holds
# it open, and that exit kills the process groups the test helpers started
# (test/helpers/child.ts): a hang ends, and nothing it started outlives it.
TEST_TIMEOUT_MS=240000
RUN_FLAGS=(--test --test-concurrency=2 --test-timeout="$TEST_TIMEOUT_MS" --test-force-exit)
if $unit; then
  npm run --silent build
  mapfile -t tests < <({ find dist/test -maxdepth 1 -name '*.test.js' && find dist/test/domain dist/test/docs dist/test/report dist/test/metrics -name '*.test.js'; } | sort)
  exec node "${RUN_FLAGS[@]}" "${tests[@]}"
fi

need_debs=()
command -v "${CHROMIUM_BIN:-/usr/bin/chromium}" >/dev/null 2>&1 || need_debs+=(chromium) # the console's browser test (test/e2e/console.test.ts)
# promtool tests the rules; prometheus runs them against a real agent (test/contrib/prometheus.test.ts).
{ command -v promtool && command -v prometheus; } >/dev/null 2>&1 || need_debs+=(prometheus)
# The etcd deploy store is tested against a real etcd the tests start
# themselves on loopback ports (test/helpers/etcd.ts); ETCD_BIN names another binary.
command -v "${ETCD_BIN:-etcd}" >/dev/null 2>&1 || need_debs+=(etcd-server)
command -v openssl >/dev/null 2>&1 || need_debs+=(openssl) # the etcd TLS test makes its certificates (test/helpers/etcd-tls.ts)
command -v systemd-analyze >/dev/null 2>&1 || need_debs+=(systemd)
command -v setpriv >/dev/null 2>&1 || need_debs+=(util-linux) # an agent started without CAP_DAC_OVERRIDE (test/e2e/start-failures.test.ts)
# systemd-socket-activate holds the socket across restarts (test/e2e/restart.test.ts); it comes with systemd.
command -v systemd-socket-activate >/dev/null 2>&1 || need_debs+=(systemd)
# The gate behind stock proxies, run for real with contrib/proxy/ (test/contrib/proxies.test.ts).
command -v nginx >/dev/null 2>&1 || need_debs+=(nginx)
command -v caddy >/dev/null 2>&1 || need_debs+=(caddy)
# The power-loss audit records the real agent under strace (test/crash/power-audit*.test.ts); STRACE_BIN names another binary.
command -v "${STRACE_BIN:-/usr/bin/strace}" >/dev/null 2>&1 || need_debs+=(strace)
if [ ${#need_debs[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "test: missing ${need_debs[*]} (Debian); install as root: apt-get install -y ${need_debs[*]}" >&2
    exit 1
  fi
  echo "test: installing ${need_debs[*]} from Debian" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends "${need_debs[@]}" >&2
fi

npm run --silent build
# Only the *.test.js files are tests: helpers under dist/test are modules
# the tests import, and a runner handed the directory would count them too.
if [ ${#named[@]} -gt 0 ]; then
  tests=("${named[@]}")
else
  mapfile -t tests < <(find dist/test dist/bench -name '*.test.js' | sort)
fi
# NODE_EXTRA_CA_CERTS (some hosts set it to the system's bundle) makes
# every node process parse the whole bundle before any code runs: about
# 0.1 s of CPU a process, and the suite starts hundreds of them. No test
# talks TLS to a public CA (the etcd TLS test brings its own CA file).
unset NODE_EXTRA_CA_CERTS
exec node "${RUN_FLAGS[@]}" "${tests[@]}"
