# Result 3 of the seed: DeepSeek-V4.1-Flash, 500K context, concurrency 512,
# DSpark: Adaptive against resident serving, for both Engram table placements.
set terminal pngcairo size 900,520 font ",11"
set output "fig3-dsv41.png"
set datafile separator "\t"
mark(k) = real(system("awk -F'\\t' '$1==\"" . k . "\"{print $2}' data/dsv41-marks.tsv"))
set title "DeepSeek-V4.1-Flash, 500K context, concurrency 512, DSpark (simulated)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set ylabel "output tokens/s per decode GPU"
set y2label "Adaptive / resident"
set yrange [0:*]
set y2range [0:*]
set ytics nomirror
set y2tics
set grid ytics
set key outside bottom center horizontal
set xrange [-0.6:1.6]
plot "data/dsv41.tsv" using 2:xtic(1) skip 1 title "resident + DSpark" lc rgb "#bbbbbb", \
     "" using 3 skip 1 title "Adaptive + DSpark" lc rgb "#4477aa", \
     "" using 0:($3/$2) skip 1 axes x1y2 with points pt 7 ps 2 lc rgb "black" title "ratio (right axis)", \
     mark("seed_ratio") axes x1y2 with lines dt 2 lw 2 lc rgb "black" title "seed: 1.85x"
