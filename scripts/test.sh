#!/usr/bin/env bash
# Runs the whole test suite. On a fresh Debian machine it first installs the
# reference servers and third-party clients the integration tests drive.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages the tests need, each with a command (or Perl/Ruby module)
# that proves it is installed.
missing=()
command -v beanstalkd >/dev/null || missing+=(beanstalkd)
command -v gearmand >/dev/null || [ -x /usr/sbin/gearmand ] || missing+=(gearman-job-server)
command -v gearman >/dev/null && command -v gearadmin >/dev/null || missing+=(gearman-tools)
perl -MGearman::Client -e 1 2>/dev/null || missing+=(libgearman-client-perl)
command -v ruby >/dev/null || missing+=(ruby)
ruby -e 'require "beaneater"' 2>/dev/null || missing+=(ruby-beaneater)
command -v php >/dev/null || missing+=(php-cli)
php -r 'exit(class_exists("GearmanClient") ? 0 : 1);' 2>/dev/null || missing+=(php-gearman)
[ -f /usr/share/php/Pheanstalk/autoload.php ] || missing+=(php-pda-pheanstalk)

if [ ${#missing[@]} -gt 0 ]; then
	echo "installing: ${missing[*]}"
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo="sudo"
	export DEBIAN_FRONTEND=noninteractive
	$sudo apt-get update -q
	$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
# gearmand lives in /usr/sbin, which a non-root PATH may lack.
export PATH="$PATH:/usr/sbin"

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
	echo "gofmt would change:" $unformatted >&2
	exit 1
fi
go vet ./...
go test -race -count=1 -timeout 12m ./...
# With one CPU the event loops wait parked on the runtime's netpoller
# (internal/epoll ParkWhenAlone) instead of in a system call: run the
# servers' own suites that way too.
go test -race -count=1 -timeout 6m -cpu 1 -run 'Beanstalk|Gearman' ./proxy/
