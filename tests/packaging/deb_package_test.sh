#!/usr/bin/env bash
# Builds the .deb with cpack from a configured and built tree (into a temporary directory, as
# `cpack -G DEB` in build/ would) and checks what it holds: the binaries (stripped), the systemd
# units, users and tmpfiles entries, the settings as conffiles with their modes, the docs, the
# web UI when build/web exists, the maintainer scripts and the library dependencies. The units
# are checked with systemd-analyze verify against the unpacked tree.
# Usage: deb_package_test.sh <build dir> <source dir>
set -u
BUILD=$(realpath "$1")
SRC=$(realpath "$2")
OUT=$(mktemp -d /tmp/qm-deb-XXXXXX)
trap 'rm -rf "$OUT"' EXIT
failures=0
checks=0
pass() { checks=$((checks + 1)); echo "ok:   $1"; }
fail() { checks=$((checks + 1)); failures=$((failures + 1)); echo "FAIL: $1"; shift; printf '    %s\n' "$@"; }
expect() { if [ "$2" = "$3" ]; then pass "$1"; else fail "$1" "want: $3" "got:  $2"; fi; }

if ! cpack --config "$BUILD/CPackConfig.cmake" -G DEB -B "$OUT" > "$OUT/cpack.log" 2>&1; then
  echo "FAIL: cpack -G DEB"; cat "$OUT/cpack.log"; exit 1
fi
deb=$(ls "$OUT"/quartermaster_*.deb 2>/dev/null | head -1)
expect "cpack made quartermaster_<version>_<arch>.deb" "$([ -f "$deb" ] && basename "$deb" | sed -E 's/_[0-9.]+_[a-z0-9]+\.deb$/_V_A.deb/')" "quartermaster_V_A.deb"
[ -f "$deb" ] || exit 1

# "<mode> <owner> <path>" for each entry.
listing=$(dpkg-deb -c "$deb" | awk '{print $1, $2, $6}')
entry() { grep -E " \./$1\$" <<<"$listing" | awk '{print $1, $2}'; }
for f in usr/bin/quartermaster usr/bin/qm-agent; do
  expect "$f: an executable of root" "$(entry "$f")" "-rwxr-xr-x root/root"
done
for f in usr/lib/systemd/system/quartermaster.service usr/lib/systemd/system/qm-agent.service \
         usr/lib/sysusers.d/quartermaster.conf usr/lib/tmpfiles.d/qm-agent.conf \
         usr/share/doc/quartermaster/README.md usr/share/doc/quartermaster/docs/agents.md \
         usr/share/doc/quartermaster/docs/security.md etc/qm-agent/qm-agent.env; do
  expect "$f: 0644 root" "$(entry "$f")" "-rw-r--r-- root/root"
done
expect "the README is the project's (docs/README.md is docs/README.md)" \
  "$(dpkg-deb --fsys-tarfile "$deb" | tar -xO ./usr/share/doc/quartermaster/README.md | head -1)" "# Quartermaster"
expect "the server's settings (may hold a password): 0600 until postinst hands them to its group" \
  "$(entry etc/quartermaster/quartermaster.conf)" "-rw------- root/root"
expect "no credential ships in the package" "$(grep -cE 'kubeconfig|\.key$|\.token$' <<<"$listing")" "0"
if [ -f "$BUILD/web/index.html" ]; then
  expect "the built web UI" "$(entry usr/share/quartermaster/web/index.html)" "-rw-r--r-- root/root"
  expect "with all its files" "$(grep -c ' \./usr/share/quartermaster/web/.*[^/]$' <<<"$listing")" \
    "$(find "$BUILD/web" -type f | wc -l)"
else
  expect "no web UI without build/web" "$(grep -c 'usr/share/quartermaster/web/' <<<"$listing")" "0"
fi

expect "package name" "$(dpkg-deb -f "$deb" Package)" "quartermaster"
depends=$(dpkg-deb -f "$deb" Depends)
for d in libc6 libpqxx libgrpc++ systemd acl; do
  if grep -q "$d" <<<"$depends"; then pass "depends on $d"; else fail "depends on $d" "got: $depends"; fi
done
mkdir "$OUT/control"
dpkg-deb -e "$deb" "$OUT/control"
expect "conffiles: the settings" "$(sort "$OUT/control/conffiles" 2>/dev/null)" \
  "/etc/qm-agent/qm-agent.env
/etc/quartermaster/quartermaster.conf"
for s in postinst prerm postrm; do
  expect "maintainer script $s, 0755" "$(stat -c %a "$OUT/control/$s" 2>/dev/null)" "755"
  if sh -n "$OUT/control/$s" 2>/dev/null; then pass "$s parses"; else fail "$s parses"; fi
done

mkdir "$OUT/root"
dpkg-deb -x "$deb" "$OUT/root"
for b in quartermaster qm-agent; do
  expect "$b is stripped (no .debug_info)" \
    "$(readelf -S "$OUT/root/usr/bin/$b" | grep -c '\.debug_info')" "0"
done
expect "the packaged agent runs (--help)" \
  "$("$OUT/root/usr/bin/qm-agent" --help 2>&1 | grep -c -- '--state-dir')" "1"
unit() { grep -E "^$2=" "$OUT/root/usr/lib/systemd/system/$1" | cut -d= -f2- | paste -sd' '; }
expect "quartermaster.service: dedicated user" "$(unit quartermaster.service User)" "quartermaster"
expect "quartermaster.service: restarts on failure" "$(unit quartermaster.service Restart)" "on-failure"
expect "quartermaster.service: private state directory" \
  "$(unit quartermaster.service StateDirectory) $(unit quartermaster.service StateDirectoryMode)" \
  "quartermaster 0700"
expect "quartermaster.service: configuration directory for its group" \
  "$(unit quartermaster.service ConfigurationDirectory) $(unit quartermaster.service ConfigurationDirectoryMode)" \
  "quartermaster 0750"
expect "qm-agent.service: dedicated user" "$(unit qm-agent.service User)" "qm-agent"
expect "qm-agent.service: restarts on failure" "$(unit qm-agent.service Restart)" "on-failure"
expect "qm-agent.service: private state directory" \
  "$(unit qm-agent.service StateDirectory) $(unit qm-agent.service StateDirectoryMode)" "qm-agent 0700"
expect "qm-agent.service: its credential through systemd (root-only file)" \
  "$(unit qm-agent.service LoadCredential)" "kubeconfig:/etc/qm-agent/kubeconfig"
expect "sysusers: both users" "$(awk '$1 == "u" {print $2}' "$OUT/root/usr/lib/sysusers.d/quartermaster.conf" | paste -sd' ')" \
  "quartermaster qm-agent"

# The agent's command line as its unit runs it (systemd turns $$ into $ before sh sees it).
exec_start=$(sed -n '/^ExecStart=/,/[^\\]$/p' "$OUT/root/usr/lib/systemd/system/qm-agent.service" |
  sed -e 's/^ExecStart=//' -e 's/\\$//' | tr -d '\n' | sed -e 's/\$\$/$/g')
mkdir -p "$OUT/bin" "$OUT/creds"
printf '#!/bin/sh\nfor a in "$@"; do printf "[%%s]" "$a"; done\n' > "$OUT/bin/qm-agent"
chmod +x "$OUT/bin/qm-agent"
run_unit() {
  env -i PATH=/usr/bin:/bin CREDENTIALS_DIRECTORY="$OUT/creds" "$@" \
    bash -c "eval \"\$0\"" "${exec_start//\/usr\/bin\/qm-agent/$OUT/bin/qm-agent}"
}
expect "ExecStart with the defaults" "$(run_unit QM_AGENT_NODE_NAME=n1 QM_AGENT_SERVER= QM_AGENT_ARGS=)" \
  "[--node-name][n1][--kubeconfig][$OUT/creds/kubeconfig][--cdi-dir][/run/cdi][--state-dir][/var/lib/qm-agent]"
expect "ExecStart with a server and more flags" \
  "$(run_unit QM_AGENT_NODE_NAME=n1 QM_AGENT_SERVER=qm:8081 "QM_AGENT_ARGS=--simulate /etc/qm-agent/gpus.yaml")" \
  "[--node-name][n1][--kubeconfig][$OUT/creds/kubeconfig][--server][qm:8081][--cdi-dir][/run/cdi][--state-dir][/var/lib/qm-agent][--simulate][/etc/qm-agent/gpus.yaml]"

if command -v systemd-analyze >/dev/null; then
  # Against the packaged binaries (verify wants ExecStart's program to exist); any complaint, an
  # unknown key included, fails.
  mkdir "$OUT/units"
  for u in quartermaster.service qm-agent.service; do
    sed "s|/usr/bin/|$OUT/root/usr/bin/|g" "$OUT/root/usr/lib/systemd/system/$u" > "$OUT/units/$u"
    expect "systemd-analyze verify $u" "$(systemd-analyze verify "$OUT/units/$u" 2>&1)" ""
  done
fi

echo "$((checks - failures))/$checks checks passed"
[ "$failures" = 0 ]
