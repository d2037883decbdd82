#!/usr/bin/env bash
# step.sh names the steps of `make test` (its layers and the tools they
# build) as they start and end, with their durations, so that a newcomer sees
# where the minutes go; at the end of `make test`, a table of them all.
#
# Usage:
#   hack/step.sh run NAME COMMAND [ARG...]  run COMMAND as the step NAME
#   hack/step.sh begin NAME                 before the recipe lines of step NAME
#   hack/step.sh end NAME                   after them
#   hack/step.sh reset                      forget the steps recorded so far
#   hack/step.sh summary                    print every step recorded since reset
#
# The steps are recorded in STEPS_FILE (default .steps): one line per
# start and end, so that steps run by parallel makes (make -j) add up.
# With STEP_LOGS set to a folder (make test sets it: its layers run side by
# side), `run` writes each step's output to its own file there instead of
# the terminal, and prints that file when the step fails.
set -euo pipefail

file=${STEPS_FILE:-.steps}
# The time in seconds; date, not bash 5's EPOCHSECONDS: macOS has bash 3.2.
now=$(date +%s)

# duration prints seconds as 1h02m03s, 2m03s or 3s.
duration() {
	local s=$1
	if ((s >= 3600)); then
		printf '%dh%02dm%02ds' $((s / 3600)) $((s % 3600 / 60)) $((s % 60))
	elif ((s >= 60)); then
		printf '%dm%02ds' $((s / 60)) $((s % 60))
	else
		printf '%ds' "$s"
	fi
}

# begin records step $1 as started; $2, if any, is where its output goes.
begin() {
	printf 'begin\t%s\t%s\n' "$now" "$1" >>"$file"
	printf '\n==> %s%s\n' "$1" "${2:+ (output: $2)}"
}

# end records step $1 as ended with exit status $2.
end() {
	local start now
	now=$(date +%s)
	start=$(awk -F '\t' -v name="$1" '$1 == "begin" && $3 == name {t = $2} END {print t}' "$file" 2>/dev/null)
	printf 'end\t%s\t%s\t%s\n' "$now" "$1" "$2" >>"$file"
	if (($2 == 0)); then
		printf '<== %s: %s\n' "$1" "$(duration $((now - ${start:-$now})))"
	else
		printf '<== %s: FAILED after %s\n' "$1" "$(duration $((now - ${start:-$now})))"
	fi
}

# summary prints the steps in the order they started: when, for how long,
# and whether they failed or did not end (a failed recipe of several lines).
summary() {
	[[ -f $file ]] || return 0
	printf '\n%-32s %9s %9s\n' step start duration
	awk -F '\t' -v now="$now" '
		$1 == "reset" { t0 = $2 }
		$1 == "begin" { order[++count] = $3; started[$3] = $2 }
		$1 == "end" { ended[$3] = $2; status[$3] = $4 }
		function d(s) { return s >= 60 ? sprintf("%dm%02ds", s / 60, s % 60) : sprintf("%ds", s) }
		END {
			if (t0 == "") t0 = started[order[1]]
			for (i = 1; i <= count; i++) {
				n = order[i]
				note = !(n in ended) ? "  did not end" : status[n] != 0 ? "  FAILED" : ""
				stop = (n in ended) ? ended[n] : now
				printf "%-32s %9s %9s%s\n", n, "+" d(started[n] - t0), d(stop - started[n]), note
			}
			printf "%-32s %9s %9s\n", "total (wall clock)", "", d(now - t0)
		}' "$file"
}

case ${1:-} in
run)
	name=$2
	shift 2
	rc=0
	if [[ -n ${STEP_LOGS:-} ]]; then
		mkdir -p "$STEP_LOGS"
		log=$STEP_LOGS/$(tr -c 'a-zA-Z0-9_.\n-' - <<<"$name" | tr -s - | sed 's/-$//').log
		begin "$name" "$log"
		"$@" >"$log" 2>&1 || rc=$?
		end "$name" "$rc"
		if ((rc != 0)); then
			printf '\n---- %s failed; its output (%s):\n' "$name" "$log"
			cat "$log"
			printf -- '---- end of the output of %s\n' "$name"
		fi
	else
		begin "$name"
		"$@" || rc=$?
		end "$name" "$rc"
	fi
	exit "$rc"
	;;
begin) begin "$2" ;;
end) end "$2" 0 ;;
reset) printf 'reset\t%s\n' "$now" >"$file" ;;
summary) summary ;;
*)
	echo "usage: hack/step.sh run NAME COMMAND... | begin NAME | end NAME | reset | summary" >&2
	exit 2
	;;
esac
