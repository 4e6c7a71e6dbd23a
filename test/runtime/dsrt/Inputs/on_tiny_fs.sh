#!/usr/bin/env bash
# on_tiny_fs.sh SIZE DIR CMD...: runs CMD with a tmpfs of SIZE mounted at DIR
# (a disk that fills up), then unmounts it whatever CMD did; exits with
# CMD's status. Needs root (lit's feature "tmpfs").
set -u
size=$1 dir=$2
shift 2
mkdir -p "$dir"
mount -t tmpfs -o "size=$size" tmpfs "$dir" || exit 99
"$@"
status=$?
umount "$dir"
exit $status
