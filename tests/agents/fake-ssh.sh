#!/bin/sh
# A stand-in for ssh in the attach tests: it writes its arguments, one a
# line, to FAKE_SSH_ARGS, says on stderr why it cannot log in (the last
# line is the reason, as ssh's is), and fails as ssh does, with 255.
printf '%s\n' "$@" > "$FAKE_SSH_ARGS"
echo "Warning: an earlier line of no interest" >&2
echo "ann@build-1: Permission denied (publickey)." >&2
exit 255
