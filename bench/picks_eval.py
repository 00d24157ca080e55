"""The model's own picks, measured: top-1 and best-of-top-4 of model_picks_h200_v1_top4.csv (before run 4),
model_picks_h200_v2.csv (after run 4), model_picks_h200_v3.csv (run 5: the same model and profile as v2, the
top 8 one per distinct predicted time, search.top_distinct), model_picks_h200_v4.csv (run 6: exact ties of the
launch order reported in the order the profile's tie_order_async/_sync favour; 10 more shapes never measured
before) with model_picks_h200_v4b.csv (the same model, 12 shapes measured in run 9) and model_picks_h200_v5.csv
(A's registers on the synchronous path from ptxas' counts, re-fitted), over every measured file (fidelity.DATA).

    python -m bench.picks_eval"""

from pathlib import Path

import numpy as np
import pandas as pd

from bench.fidelity import DATA, KNOBS, _geo, merge_measured

D = Path(__file__).resolve().parent / "data"
files = DATA
m = merge_measured([(f.name, pd.read_csv(f)) for f in files])
NEW6 = {
    "4096x14336x4096",
    "8192x4096x14336",
    "2048x5120x5120",
    "64x28672x4096",
    "1024x1024x8192",
    "16384x1024x1024",
    "3072x3072x768",
    "2047x2047x2047",
    "1000x2000x3000",
    "4096x4104x4096",
}
NEW9 = {
    "8192x8192x8192",
    "2048x11008x4096",
    "4096x4096x11008",
    "1024x6144x4096",
    "256x4096x14336",
    "16x14336x4096",
    "6144x2048x8192",
    "1536x8192x1536",
    "5000x5000x5000",
    "2048x1000x2048",
    "3000x3000x4096",
    "1023x1023x1023",
}
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


VERSIONS = ("v1", "v2", "v3", "v4", "v5")
versions = {
    v: ev(pd.read_csv(D / f))
    for v, f in (
        ("v1", "model_picks_h200_v1_top4.csv"),
        ("v2", "model_picks_h200_v2.csv"),
        ("v3", "model_picks_h200_v3.csv"),
        ("v4", "model_picks_h200_v4.csv"),
    )
}
# run 9: the same model and profile as v4, 12 shapes measured only after the model was final
versions["v4"] = pd.concat(
    [versions["v4"], ev(pd.read_csv(D / "model_picks_h200_v4b.csv"))], ignore_index=True
)
# v5: A's synchronous-path registers from ptxas' counts, re-fitted; all 50 shapes; every top-4 pick was measured
versions["v5"] = ev(pd.read_csv(D / "model_picks_h200_v5.csv"))
t = versions["v1"].add_suffix("_v1").rename(columns={"shape_v1": "shape"})
for v in VERSIONS[1:]:
    t = t.merge(
        versions[v].add_suffix(f"_{v}").rename(columns={f"shape_{v}": "shape"}), on="shape", how="outer"
    )
t["set"] = np.select(
    [t["shape"].isin(NEW9), t["shape"].isin(NEW6), t["shape"].isin(NEW)],
    ["run-9 new 12", "run-6 new 10", "run-4 new 6"],
    "held-out 22",
)
pd.set_option("display.width", 250)
print(t.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
for lab in ("held-out 22", "run-4 new 6", "run-6 new 10", "run-9 new 12", "all 50"):
    g = t if lab == "all 50" else t[t["set"] == lab]
    print(
        f"{lab}: "
        + " | ".join(
            f"{v} top1 {_geo(g[f'top1_{v}']):.3f} (min {g[f'top1_{v}'].min():.3f}) "
            f"top4 {_geo(g[f'top4_{v}']):.3f} (min {g[f'top4_{v}'].min():.3f})"
            for v in VERSIONS
            if g[f"top1_{v}"].notna().all()
        )
    )
