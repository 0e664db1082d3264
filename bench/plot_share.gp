# Share over time of the 1:3:6 work-conservation scenario (vgpu_bench_share
# --scenario conserve-1-3-6). Usage:
#   gnuplot -e "csv='share_conserve-1-3-6_series.csv'; out='share_136.png'; stop=4.0; back=7.0" bench/plot_share.gp
# csv columns: t_s, w1/w3/w6 share per 100 ms, the same over a centred 500 ms
# window, engine busy. stop/back: when w6 stopped and returned (s), optional.
if (!exists("csv")) csv = 'share_conserve-1-3-6_series.csv'
if (!exists("out")) out = 'share_136.png'
set terminal pngcairo size 900,450 font "DejaVu Sans,9"
set output out
set datafile separator ','
set key outside right top
set title "Weighted 1:3:6 on the simulated node: the weight-6 tenant leaves and returns\n(share of device time; thin: 100 ms intervals, thick: centred 500 ms average)"
set xlabel "time since start (s)"
set ylabel "share of the device (%)"
set yrange [0:105]
set ytics 10
set grid ytics lc rgb "#dddddd"
if (exists("stop") && exists("back")) {
  set object 1 rect from stop, graph 0 to back, graph 1 fc rgb "#f2f2f2" fs solid 1.0 noborder behind
  set label 1 "weight-6 tenant idle\n(targets 25 / 75)" at (stop + back) / 2, 97 center font ",9"
}
set arrow from graph 0, first 10 to graph 1, first 10 nohead dt 2 lc rgb "#1f77b4"
set arrow from graph 0, first 30 to graph 1, first 30 nohead dt 2 lc rgb "#ff7f0e"
set arrow from graph 0, first 60 to graph 1, first 60 nohead dt 2 lc rgb "#2ca02c"
plot csv using 1:2 skip 1 with lines lw 0.5 lc rgb "#a6c8e6" notitle, \
     csv using 1:3 skip 1 with lines lw 0.5 lc rgb "#ffc898" notitle, \
     csv using 1:4 skip 1 with lines lw 0.5 lc rgb "#a8dba8" notitle, \
     csv using 1:5 skip 1 with lines lw 2.5 lc rgb "#1f77b4" title "weight 1 (target 10%)", \
     csv using 1:6 skip 1 with lines lw 2.5 lc rgb "#ff7f0e" title "weight 3 (target 30%)", \
     csv using 1:7 skip 1 with lines lw 2.5 lc rgb "#2ca02c" title "weight 6 (target 60%)", \
     csv using 1:8 skip 1 with lines lw 1 lc rgb "#555555" title "engine busy"
