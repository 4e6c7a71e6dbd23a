#!/usr/bin/env bash
# A multi-host test bed on one machine, made and removed by this script (as
# root): N "hosts", each a network namespace with its own mount and UTS
# namespaces (host name hK, a private /run), an sshd (Debian's
# openssh-server) with generated keys, and a node-local folder; the hosts
# are joined by a bridge inside a namespace of its own, on addresses of the
# benchmarking range 198.18.0.0/15 (RFC 2544) that exist only inside the
# namespaces. Nothing is added to the machine's own network.
#
#   scripts/testbed.sh up N DIR      make N hosts; DIR (new or empty) gets
#                                    hostfile (198.18.0.K slots=S), ssh_config,
#                                    the keys, and hK/ per host
#   scripts/testbed.sh run DIR K CMD...  run CMD on host K (its namespaces)
#   scripts/testbed.sh procs DIR K   the processes on host K but its sshd
#                                    and the namespace's holder (orphans)
#   scripts/testbed.sh down DIR      stop every process of the hosts, remove
#                                    the namespaces (DIR stays)
#   scripts/testbed.sh check         exit 0 when a test bed can be made here,
#                                    else print why and exit 1
#
# Each host sees its own node-local folder at DIR/local (hK/local from
# outside), the way a node's local disk sits at the same path on every
# node. TESTBED_SLOTS (default 1) sets the hostfile's slots per host.
# docs/multi-host.md describes the bed and what the tests do with it.
set -euo pipefail

die() { echo "testbed: $*" >&2; exit 1; }

check() {
  [ "$(id -u)" -eq 0 ] || { echo "testbed: needs root (network namespaces)"; return 1; }
  command -v ip >/dev/null || { echo "testbed: no ip (apt-get install iproute2)"; return 1; }
  command -v unshare >/dev/null && command -v nsenter >/dev/null ||
    { echo "testbed: no unshare/nsenter (util-linux)"; return 1; }
  [ -x /usr/sbin/sshd ] || { echo "testbed: no /usr/sbin/sshd (apt-get install openssh-server)"; return 1; }
  command -v ssh-keygen >/dev/null || { echo "testbed: no ssh-keygen (openssh-client)"; return 1; }
  local probe="dsctb-probe-$$"
  ip netns add "$probe" 2>/dev/null || { echo "testbed: cannot create a network namespace here"; return 1; }
  ip netns del "$probe"
}

# The bed's namespaces are named after DIR, so two beds (lit runs tests in
# parallel) never share one.
tag_of() { printf 'dsctb-%s' "$(printf '%s' "$(realpath -m "$1")" | md5sum | cut -c1-8)"; }

holder_pid() { cat "$1/h$2/holder.pid" 2>/dev/null || die "host $2 of $1 is not up"; }

on_host() { # DIR K CMD...: CMD in host K's network, mount and UTS namespaces
  local dir=$1 k=$2
  shift 2
  nsenter -t "$(holder_pid "$dir" "$k")" -n -m -u -- "$@"
}

up() {
  local n=$1 dir=$2 slots=${TESTBED_SLOTS:-1}
  [[ "$n" =~ ^[1-9][0-9]?$ ]] && [ "$n" -le 62 ] || die "up: N must be 1..62, not '$n'"
  check >/dev/null || die "$(check)"
  mkdir -p "$dir"
  dir=$(realpath "$dir")
  [ -z "$(ls -A "$dir")" ] || die "up: $dir is not empty"
  local tag
  tag=$(tag_of "$dir")
  echo "$n" > "$dir/hosts"
  mkdir -p "$dir/local"
  ssh-keygen -q -t ed25519 -N '' -C testbed -f "$dir/id_ed25519"
  cp "$dir/id_ed25519.pub" "$dir/authorized_keys"
  cat > "$dir/ssh_config" <<EOF
Host *
  IdentityFile $dir/id_ed25519
  IdentitiesOnly yes
  UserKnownHostsFile $dir/known_hosts
  StrictHostKeyChecking yes
  BatchMode yes
  ConnectTimeout 5
EOF
  : > "$dir/known_hosts"
  : > "$dir/hostfile"

  ip netns add "$tag-br"
  ip -n "$tag-br" link add br0 type bridge
  ip -n "$tag-br" link set br0 up
  ip -n "$tag-br" link set lo up
  local k
  for k in $(seq 1 "$n"); do
    local h="$dir/h$k" ns="$tag-h$k" addr="198.18.0.$k"
    mkdir -p "$h/local"
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    ip -n "$tag-br" link add "v$k" type veth peer name eth0 netns "$ns"
    ip -n "$tag-br" link set "v$k" master br0 up
    ip -n "$ns" addr add "$addr/24" dev eth0
    ip -n "$ns" link set eth0 up
    ssh-keygen -q -t ed25519 -N '' -C "h$k" -f "$h/ssh_host_ed25519_key"
    echo "$addr $(cut -d' ' -f1,2 "$h/ssh_host_ed25519_key.pub")" >> "$dir/known_hosts"
    echo "$addr slots=$slots" >> "$dir/hostfile"
    cat > "$h/sshd_config" <<EOF
ListenAddress $addr
HostKey $h/ssh_host_ed25519_key
PidFile /run/sshd.pid
AuthorizedKeysFile $dir/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PrintMotd no
# A client on the far side of a cut link is given up after 3 x 5 s.
ClientAliveInterval 5
ClientAliveCountMax 3
EOF
    # The holder keeps the host's mount and UTS namespaces: host name hK,
    # a private /run (sshd's privilege separation folder and pid file), and
    # the node-local folder at DIR/local.
    ip netns exec "$ns" unshare --mount --uts --propagation private --fork \
      sh -c 'hostname "$1"; mount -t tmpfs tmpfs /run && mkdir -p /run/sshd &&
             mount --bind "$2" "$3" && echo $$ > "$4" && exec sleep infinity' \
      sh "h$k" "$h/local" "$dir/local" "$h/holder.pid" </dev/null >/dev/null 2>&1 &
    local i
    for i in $(seq 1 100); do [ -s "$h/holder.pid" ] && break; sleep 0.05; done
    [ -s "$h/holder.pid" ] || die "host $k: its namespaces did not come up"
    on_host "$dir" "$k" /usr/sbin/sshd -f "$h/sshd_config" -E "$h/sshd.log" ||
      die "host $k: sshd did not start ($h/sshd.log)"
  done
  # Every sshd answers before up returns.
  for k in $(seq 1 "$n"); do
    local ok=
    for i in $(seq 1 50); do
      if on_host "$dir" 1 ssh -F "$dir/ssh_config" "198.18.0.$k" true 2>/dev/null; then ok=1; break; fi
      sleep 0.1
    done
    [ -n "$ok" ] || die "host $k: no ssh login from host 1"
  done
}

# The processes of host K: those in its network namespace, but the holder
# (and the unshare that started it) and sshd's listener.
procs() {
  local dir=$1 k=$2 tag
  tag=$(tag_of "$dir")
  local holder listener= starter
  holder=$(holder_pid "$dir" "$k")
  starter=$(ps -o ppid= -p "$holder" | tr -d ' ')
  listener=$(on_host "$dir" "$k" cat /run/sshd.pid 2>/dev/null || true)
  local p
  for p in $(ip netns pids "$tag-h$k" 2>/dev/null); do
    [ "$p" = "$holder" ] || [ "$p" = "$starter" ] || [ "$p" = "$listener" ] && continue
    ps -o pid=,args= -p "$p" 2>/dev/null || true
  done
}

down() {
  local dir
  dir=$(realpath -m "$1")
  local tag
  tag=$(tag_of "$dir")
  local n
  n=$(cat "$dir/hosts" 2>/dev/null || echo 0)
  local k ns
  for k in $(seq 1 "$n"); do
    ns="$tag-h$k"
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
    rm -f "$dir/h$k/holder.pid"
  done
  ip netns del "$tag-br" 2>/dev/null || true
}

case "${1:-}" in
  up) [ $# -eq 3 ] || die "usage: up N DIR"; up "$2" "$3" ;;
  run) # exec: a signal for CMD (a test's Ctrl-C) reaches it, not this script
    [ $# -ge 4 ] || die "usage: run DIR K CMD..."
    d=$2 k=$3
    shift 3
    pid=$(holder_pid "$d" "$k")
    exec nsenter -t "$pid" -n -m -u -- "$@" ;;
  procs) [ $# -eq 3 ] || die "usage: procs DIR K"; procs "$2" "$3" ;;
  down) [ $# -eq 2 ] || die "usage: down DIR"; down "$2" ;;
  check) check ;;
  *) die "usage: $0 up N DIR | run DIR K CMD... | procs DIR K | down DIR | check" ;;
esac
