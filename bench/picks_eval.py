"""Model picks before/after (run 4): top-1 and best-of-top-4 of model_picks_h200_v1_top4.csv (HEAD model + profile
before this change) and model_picks_h200_v2.csv (this change), over every measured file. python3 bench/picks_eval.py"""

import sys
from pathlib import Path as _P

sys.path.insert(0, str(_P(__file__).resolve().parent))
sys.path.insert(0, str(_P(__file__).resolve().parent.parent))
from pathlib import Path

import numpy as np
import pandas as pd
from fidelity import DATA, KNOBS, _geo, merge_measured

D = Path(__file__).resolve().parent / "data"
files = DATA
m = merge_measured([(f.name, pd.read_csv(f)) for f in files])
NEW = {
    "4096x11008x4096",
    "1024x4096x11008",
    "512x2048x8192",
    "3584x3584x3584",
    "1000x4096x4096",
    "2048x2050x2048",
}


def ev(picks, top=4):
    rows = []
    for (M, N, K), d in picks.groupby(["M", "N", "K"], sort=False):
        d = d.sort_values("model_rank").head(top)
        mm = m[(m.M == M) & (m.N == N) & (m.K == K)]
        best = mm.ms.min()
        t = []
        for _, r in d.iterrows():
            x = mm[np.logical_and.reduce([mm[k] == int(r[k]) for k in KNOBS])]
            t.append(x.ms.iloc[0] if len(x) else np.nan)
        rows.append(
            dict(
                shape=f"{M}x{N}x{K}",
                top1=best / t[0],
                top4=best / np.nanmin(t),
                nmeas=int(np.isfinite(t).sum()),
                cfg="{}x{}x{} s{} w{} g{} o{} sk{}".format(*(int(d.iloc[0][k]) for k in KNOBS)),
            )
        )
    return pd.DataFrame(rows)


v2 = ev(pd.read_csv(D / "model_picks_h200_v2.csv"))
v1 = ev(pd.read_csv(D / "model_picks_h200_v1_top4.csv"))
t = v1.merge(v2, on="shape", suffixes=("_v1", "_v2"))
t["new"] = t["shape"].isin(NEW)
pd.set_option("display.width", 250)
print(t.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
for lab, g in (("held-out 22", t[~t.new]), ("new 6", t[t.new]), ("all 28", t)):
    print(
        f"{lab}: v1 top1 {_geo(g.top1_v1):.3f} (min {g.top1_v1.min():.3f}) top4 {_geo(g.top4_v1):.3f} (min {g.top4_v1.min():.3f}) | v2 top1 {_geo(g.top1_v2):.3f} (min {g.top1_v2.min():.3f}) top4 {_geo(g.top4_v2):.3f} (min {g.top4_v2.min():.3f})"
    )
