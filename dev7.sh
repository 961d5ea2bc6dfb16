D=$PWD/.deps/root/usr; export LD_LIBRARY_PATH=$D/lib/x86_64-linux-gnu:/usr/local/cuda/extras/CUPTI/lib64
mkdir -p bn && tar xJf build-bin/b17.txz -C bn
cd /tmp
T=/tmp/bn_tf; cp -r $OLDPWD/bn /tmp/bnx; T=/tmp/bnx/tinyfold
$T profile --backend cuda --impl v1 --num-steps 10 --out prof_v1 > $OUT/p_v1.txt 2>&1
$T profile --backend cuda --impl v2 --num-steps 10 --out prof_v2 > $OUT/p_v2.txt 2>&1
$T profile --backend cuda --impl v3 --num-steps 10 --out prof_v3 > $OUT/p_v3.txt 2>&1
$T profile --backend cuda --impl v3 --graph --num-steps 10 --out prof_v3g > $OUT/p_v3g.txt 2>&1
$T compare prof_v1/summary.json prof_v2/summary.json prof_v3/summary.json prof_v3g/summary.json > $OUT/compare.txt 2>&1; echo "compare exit $?"
head -c 3000 $OUT/compare.txt
