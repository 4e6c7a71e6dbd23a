#!/usr/bin/env bash
# on_readonly_fs.sh DIR CMD...: runs CMD with an empty read-only tmpfs
# mounted at DIR, then unmounts it whatever CMD did; exits with CMD's
# status. Needs root (lit's feature "tmpfs").
set -u
dir=$1
shift
mkdir -p "$dir"
mount -t tmpfs -o ro,size=4k tmpfs "$dir" || exit 99
"$@"
status=$?
umount "$dir"
exit $status
