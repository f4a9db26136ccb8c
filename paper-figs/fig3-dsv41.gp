# Result 3 of the paper: DeepSeek-V4.1-Flash, 500K context, concurrency 512, DSpark: Adaptive
# against resident serving, for both placements of the Engram tables. Left: output per GPU;
# right: the ratio beside the paper's 1.85x (on its own axis, so the line does not cross the bars).
# Error bars: 95 % confidence intervals (batch means, dhsim --json "ci95_half"; data/dsv41.tsv
# columns 6 and 7); the ratio's combines its two columns' as if independent.
name = "fig3-dsv41"; w = 1100; h = 500
load "term.gp"
set datafile separator "\t"
mark(k) = real(system("awk -F'\\t' '$1==\"" . k . "\"{print $2}' data/dsv41-marks.tsv"))
steps = system("awk -F'\\t' 'NR == 2 { print $8 }' data/dsv41.tsv")
set multiplot layout 1,2 title "DeepSeek-V4.1-Flash as V4-Flash's public layers, 500K context, concurrency 512 on 4 x H200, DSpark (simulated, " . steps . "-step runs)"
set style data histograms
set style histogram errorbars gap 1 lw 1.5
set style fill solid 0.8 border -1
set grid ytics
set yrange [0:*]
set xrange [-0.6:1.6]
set key top right
set ylabel "output tokens/s per decode GPU"
plot "data/dsv41.tsv" using 2:6:xtic(1) skip 1 title "resident + DSpark" lc rgb "#bbbbbb", \
     "" using 3:7 skip 1 title "Adaptive + DSpark" lc rgb "#4477aa"
set ylabel "Adaptive + DSpark / resident + DSpark"
set style histogram rowstacked
set boxwidth 0.5
set yrange [0:3.6]
set key top left
plot "data/dsv41.tsv" using ($3/$2):xtic(1) skip 1 title "simulated ratio" lc rgb "#4477aa", \
     "" using 0:($3/$2):(($3/$2)*sqrt(($6/$2)**2+($7/$3)**2)) skip 1 with yerrorbars lc rgb "black" pt 0 lw 1.5 title "95 % confidence interval", \
     "" using 0:(($3/$2)*(1+sqrt(($6/$2)**2+($7/$3)**2))):(sprintf("%.2fx", $3/$2)) skip 1 with labels offset 0,0.8 notitle, \
     mark("paper_ratio") with lines dt 2 lw 2 lc rgb "black" title sprintf("paper: %.2fx", mark("paper_ratio"))
unset multiplot
