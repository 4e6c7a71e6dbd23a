#!/bin/bash
# dsrt on pipeline plans written without the compiler (dsrt_pipeline_plan):
#   dsrt-pipeline.sh DSRT PLAN_TOOL RENDER_TIMELINE WORKDIR
# * pp 4 x dp 1 with a hostfile of "localhost slots=4": the launcher starts
#   4 ranks, rank 0 writes metrics.csv and every stage's weights, each rank
#   its timeline; render_timeline.py prints the bubble fraction;
# * pp 2 x dp 2 without a hostfile: 4 local ranks;
# * the errors: a selection of the wrong size, a rank count given to mpirun
#   that is not pp x dp.
set -eu
DSRT=$1 TOOL=$2 RENDER=$3 WORK=$4
rm -rf "$WORK" && mkdir -p "$WORK"
cd "$WORK"
fail() { echo "FAIL: $*" >&2; exit 1; }
expect() { grep -q -- "$1" "$2" || { cat "$2" >&2; fail "no '$1' in $2"; }; }

"$TOOL" pp4 4 1 3
echo "localhost slots=4" > hosts
"$DSRT" pp4/plan --data pp4/data --steps 4 --threads 1 --hostfile hosts --out run4 \
  --timeline > out4.txt 2>&1 || { cat out4.txt; fail "pp4 run"; }
expect "starting 4 ranks with mpirun on localhost (4)" out4.txt
expect "4 steps x 3 micro-batches of 1, pipeline of 4 stages x dp 1 (gpipe schedule, 4 ranks)" out4.txt
expect "step      4/4 | loss" out4.txt
expect "communication per step (rank 0, stage 0): all_reduce 2 calls 14 elements, p2p 3 calls 18 elements" out4.txt
expect "rank host slot stage dp_index" run4/ranks.txt
expect "3 localhost 3 3 0" run4/ranks.txt
[ "$(wc -l < run4/metrics.csv)" = 5 ] || fail "metrics.csv has not 4 steps"
for w in w0 w1 w2 w3 tied; do
  grep -q "\"$w\"" run4/weights.safetensors || fail "weight $w missing from weights.safetensors"
done
for r in 0 1 2 3; do
  [ -s run4/timeline.rank-$r.csv ] || fail "no timeline of rank $r"
done
expect "rank,list,micro,index,op,start_us,end_us,mb,phase" run4/timeline.rank-3.csv
python3 "$RENDER" run4 > render4.txt || { cat render4.txt; fail "render_timeline"; }
expect "rank 3: step .* ms, .*% waiting for collectives, bubble fraction [01]\.[0-9]*" render4.txt
expect "overall: bubble fraction [01]\.[0-9]*" render4.txt
expect "render_timeline: 4 ranks ->" render4.txt
expect "forward" run4/timeline.svg
expect "(F2)</title>" run4/timeline.svg

# The same data and model on 2 stages x 2 dp ranks (4 local ranks, no
# hostfile): the losses of a step are means over the same global batch.
"$TOOL" pp2 2 2 3
"$DSRT" pp2/plan --data pp2/data --steps 2 --threads 1 --out run2 > out2.txt 2>&1 \
  || { cat out2.txt; fail "pp2 x dp2 run"; }
expect "starting 4 ranks with mpirun on localhost (4)" out2.txt
expect "pipeline of 2 stages x dp 2 (gpipe schedule, 4 ranks)" out2.txt
for w in w0 w1 tied; do
  grep -q "\"$w\"" run2/weights.safetensors || fail "weight $w missing (pp2)"
done

# Errors: a selection of 2 slots for 4 ranks; mpirun -np 3 for 4 ranks.
if "$DSRT" pp4/plan --data pp4/data --hostfile hosts --num_ranks 2 --out bad > bad.txt 2>&1; then
  fail "--num_ranks 2 ran"
fi
expect "the plan was compiled for pp=4 x dp=1 = 4 ranks but the hostfile selection gives 2 ranks: recompile with \`dsc ... --pp P --dp D\` with P x D = 2 or select 4 ranks with --num_ranks 4" bad.txt
if OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe -np 3 \
    "$DSRT" pp4/plan --data pp4/data --out bad3 > bad3.txt 2>&1; then
  fail "-np 3 ran"
fi
expect "plan compiled for pp=4 x dp=1 = 4 ranks but running on 3 ranks: run it with mpirun -np 4" bad3.txt
echo "dsrt-pipeline: OK"
