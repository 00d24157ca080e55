"""Read bandwidth against working-set size on the GPU machine (run THERE): how fast the SMs stream a buffer that
is read again and again, from 1 MiB (L2-resident) to 256 MiB (HBM), without flushing L2 between passes.

Why: flash attention's launch order decides how many K/V heads are live at once (ORDER 1 runs the heaviest query
blocks of every head first, so all heads' K/V are read together; ORDER 0 finishes one head before the next). The
model prices K/V re-reads at one L2 rate whatever the working set; this measures whether the H200's L2 (two
partitions) slows down as the live set grows before it spills to HBM.

    python -m bench.archive.l2_working_set --out $OUT/h200_l2_working_set.csv

Each size: a Triton kernel of 8 programs per SM that together read 1 GiB in 8-KiB chunks, sweeping the buffer over
and over (program p takes chunks p, p + programs, ...), timed with triton.testing.do_bench(warmup=25, rep=100) and
no L2 flush (median); bandwidth = bytes read / time. The sums are checked against torch.
"""

from __future__ import annotations

import argparse
import csv
import sys


def main(argv=None) -> int:
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def sweep_sum(x_ptr, out_ptr, chunks, reads, PROGS: tl.constexpr, CHUNK: tl.constexpr):
        # program p reads chunks p, p + PROGS, ... of the buffer, `reads` chunks in all (wrapping around it)
        pid = tl.program_id(0)
        acc = tl.zeros([CHUNK], dtype=tl.float32)
        for i in range(0, reads):
            c = (pid + i * PROGS) % chunks
            acc += tl.load(x_ptr + c.to(tl.int64) * CHUNK + tl.arange(0, CHUNK)).to(tl.float32)
        tl.store(out_ptr + pid, tl.sum(acc))

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    chunk = 4096  # 8 KiB of fp16 per load step
    progs = torch.cuda.get_device_properties(0).multi_processor_count * 8
    total = 1 << 30  # bytes read per timed call, whatever the working set
    sizes_mib = [1, 2, 4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 48, 56, 64, 80, 96, 128, 256]
    rows = []
    for mib in sizes_mib:
        n = mib * 1024 * 1024 // 2
        chunks = n // chunk
        reads = max(1, total // (chunk * 2) // progs)
        x = torch.rand(n, device="cuda", dtype=torch.float16)
        out = torch.empty(progs, device="cuda", dtype=torch.float32)

        def run(x=x, out=out, chunks=chunks, reads=reads):
            sweep_sum[(progs,)](x, out, chunks, reads, PROGS=progs, CHUNK=chunk, num_warps=4)

        run()
        torch.cuda.synchronize()
        # check: the same sums on the host side of torch
        idx = (
            torch.arange(progs, device="cuda")[:, None] + torch.arange(reads, device="cuda")[None] * progs
        ) % chunks
        ref = x.view(chunks, chunk).float().sum(dim=1)[idx].sum(dim=1)
        err = float((out - ref).abs().max() / ref.abs().max())
        ms = triton.testing.do_bench(run, warmup=25, rep=100, return_mode="median")
        read = progs * reads * chunk * 2
        gbps = read / (ms * 1e-3) / 1e9
        rows.append(
            {
                "working_set_mib": mib,
                "bytes_read": read,
                "ms": f"{ms:.6g}",
                "gbps": f"{gbps:.1f}",
                "rel_err": f"{err:.1e}",
            }
        )
        print(f"{mib:>5} MiB  {ms * 1e3:9.2f} us  {gbps:8.1f} GB/s  err {err:.1e}", file=sys.stderr)
    with open(a.out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
