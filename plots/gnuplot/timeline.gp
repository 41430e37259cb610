# Quick look: device memory after each schedule step, from the timeline_NNNNN.tsv tables that
# `lrcnn export FILE.h5 -o DIR` writes for runs with a timeline (results/SCHEMA.md, "Exported
# tables"). Every timeline in DIR is drawn, x = position in the iteration's schedule (step / steps)
# so runs with different step counts line up; or one run with run='NNNNN' (x = step). Each line is
# named from DIR/runs.tsv (net, batch, plan) when that table is there.
#
#     lrcnn export results/timeline.h5 -o /tmp/tsv
#     gnuplot -e "dir='/tmp/tsv'; out='/tmp/timeline.png'" plots/gnuplot/timeline.gp
#     gnuplot -e "dir='/tmp/tsv'; run='00003'; out='/tmp/t3.png'" plots/gnuplot/timeline.gp
#
# For the per-category figure use plots/timeline.py.

if (!exists("dir")) { print "timeline.gp: give the export directory: gnuplot -e \"dir='DIR'; out='OUT.png'\" timeline.gp"; exit status 2 }
if (!exists("out")) { out = dir . "/timeline.png" }
files = exists("run") ? sprintf("%s/timeline_%s.tsv", dir, run) : system(sprintf("ls '%s'/timeline_*.tsv 2>/dev/null", dir))
if (words(files) == 0 || system(sprintf("test -r '%s' && echo y", word(files, 1))) ne "y") { print sprintf("timeline.gp: no timeline_*.tsv in %s (lrcnn export writes them for runs with a timeline)", dir); exit status 2 }
nf = words(files)

set datafile separator "\t"
set datafile columnheaders

# Steps per run (for the x axis) and the largest value (for the unit).
array steps[nf]
top = 0
do for [i = 1:nf] {
    stats word(files, i) using 1:2 nooutput
    steps[i] = STATS_max_x + 1
    if (STATS_max_y > top) { top = STATS_max_y }
}
unit = top >= 2**30 ? 2.0**30 : 2.0**20
uname = top >= 2**30 ? "GiB" : "MiB"

# 'timeline_00003.tsv' -> '00003' -> 'vgg16 b8 2ps:4' (from runs.tsv, when present)
runid(f) = f[strstrt(f, "timeline_") + 9 : strstrt(f, ".tsv") - 1]
runs = dir . "/runs.tsv"
name(f) = system(sprintf("awk -F'\t' -v r='%s' 'NR > 1 && $1 == r { print $2 \" b\" $5 \" \" $6; f = 1 } END { if (!f) print r }' '%s' 2>/dev/null || echo %s", runid(f), runs, runid(f)))
xs(i) = exists("run") ? 1.0 : 1.0 / steps[i]

set terminal pngcairo size 1000, 520 font "sans,9"
set output out
set title (exists("run") ? sprintf("Device memory over the schedule: run %s (%s)", run, name(word(files, 1))) \
                         : sprintf("Device memory over one iteration's schedule (%s)", dir)) noenhanced
set xlabel (exists("run") ? "schedule step" : "position in the iteration's schedule (step / steps)")
set ylabel sprintf("device memory (%s)", uname)
set yrange [0:top / unit * 1.08]
set xrange [0:(exists("run") ? steps[1] : 1)]
set grid lc rgb "#dddddd"
set key outside right top vertical Left reverse samplen 2 noenhanced

plot for [i = 1:nf] word(files, i) using ($1 * xs(i)):($2 / unit) with steps lw 1.5 title name(word(files, i))
