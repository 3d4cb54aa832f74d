#!/usr/bin/env bash
# Install the Debian packages of a list that are missing ('make setup', 'make flux',
# 'make numa-vm-setup', scripts/local-slurm start):
#   scripts/apt-install.sh WHO LIST [FIX]
# LIST: one package a line ('#' comments, blank lines). WHO names the make target (or script)
# in every line said (setup: ..., flux: ...). All present: one line, exit 0. Missing, as root:
# apt-get update and install (waiting up to 15 minutes for another apt's lock: clones share a
# machine). Missing, not root: one line naming them and FIX (default 'sudo make WHO'), exit 2.
set -euo pipefail
if [ $# -lt 2 ] || [ $# -gt 3 ] || [ ! -f "$2" ]; then
  echo "apt-install: usage: scripts/apt-install.sh WHO LIST [FIX] (LIST: a file of package names)" >&2
  exit 2
fi
who=$1
fix=${3:-sudo make $who}
mapfile -t wanted < <(sed -e 's/#.*//' -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' -e '/^$/d' "$2")
missing=()
for p in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  printf '%s: Debian packages: all %d present\n' "$who" "${#wanted[@]}"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "$who: error: Debian packages missing: ${missing[*]}; run '$fix' (or apt-get install them as root)" >&2
  exit 2
fi
printf '%s: apt-get install %s\n' "$who" "${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt=(apt-get -o DPkg::Lock::Timeout=900)
"${apt[@]}" update -q >/dev/null
"${apt[@]}" install -y -q --no-install-recommends "${missing[@]}" >/dev/null
