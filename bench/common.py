"""What the bench scripts share: where things are, running a command (and
measuring its peak RSS and the machine's load), dsrt's output, and printing
/ saving a result."""
import csv
import glob
import hashlib
import os
import re
import statistics
import subprocess
import sys
import sysconfig
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("DSC_BIN", os.path.join(REPO, "build", "bin"))
PY = "/usr/bin/python3"
MiB = 2.0 ** 20


# OpenBLAS kernels it falls back to on a CPU newer than its release
# (Debian's 0.3.21 on a 2023 Xeon: Prescott, no AVX at all).
_OPENBLAS_FALLBACKS = {"prescott", "katmai", "coppermine", "northwood", "banias", "core2",
                       "penryn", "dunnington", "nehalem", "atom", "opteron", "barcelona",
                       "bobcat", "unknown"}


def _openblas_core(env):
    """The kernel set OpenBLAS picks in PyTorch's process ("Core: X" under
    OPENBLAS_VERBOSE=2), or None when PyTorch does not use OpenBLAS."""
    probe = subprocess.run([PY, "-c", "import torch; torch.ones(8, 8) @ torch.ones(8, 8)"],
                           env=dict(env, OPENBLAS_VERBOSE="2"), capture_output=True, text=True)
    m = re.search(r"Core:\s*(\S+)", probe.stdout + probe.stderr)
    return m.group(1) if m else None


def _best_openblas_core():
    """OPENBLAS_CORETYPE's name for this CPU's widest kernels."""
    flags, vendor = set(), ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags") and not flags:
                flags = set(line.split(":", 1)[1].split())
            elif line.startswith("vendor_id") and not vendor:
                vendor = line.split(":", 1)[1].strip()
    if vendor == "AuthenticAMD" and "avx2" in flags:
        return "ZEN"
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd"} <= flags:
        return "SKYLAKEX"
    if {"avx2", "fma"} <= flags:
        return "HASWELL"
    return "SANDYBRIDGE" if "avx" in flags else None


def _pytorch_openblas():
    """Gives PyTorch OpenBLAS's best kernels for this CPU, before anything
    imports torch (OpenBLAS reads OPENBLAS_CORETYPE when it loads), and says
    which it uses: Debian's OpenBLAS 0.3.21 does not know CPUs newer than
    itself and falls back to kernels without AVX (60 against 205 GFLOP/s of
    fp32 GEMM on a 2023 Xeon), which would flatter every ratio against
    PyTorch. A choice of its own that is not such a fallback, or an
    OPENBLAS_CORETYPE already set, is kept."""
    given = os.environ.get("OPENBLAS_CORETYPE")
    chosen = _openblas_core(os.environ)
    if chosen is None:
        return "PyTorch's BLAS: not OpenBLAS (no OPENBLAS_VERBOSE report)"
    if given:
        return f"PyTorch's BLAS: OpenBLAS, {chosen} kernels (OPENBLAS_CORETYPE={given}, as given)"
    best = _best_openblas_core()
    if not best or chosen.lower() not in _OPENBLAS_FALLBACKS:
        return f"PyTorch's BLAS: OpenBLAS, {chosen} kernels (its own choice)"
    forced = _openblas_core(dict(os.environ, OPENBLAS_CORETYPE=best))
    if forced is None or forced.lower() in _OPENBLAS_FALLBACKS:
        return (f"PyTorch's BLAS: OpenBLAS, {chosen} kernels (its fallback; "
                f"OPENBLAS_CORETYPE={best} is not built in)")
    os.environ["OPENBLAS_CORETYPE"] = best
    return (f"PyTorch's BLAS: OpenBLAS, {forced} kernels (OPENBLAS_CORETYPE={best}; "
            f"on its own it chose {chosen})")


# The allocators a PyTorch run may be given (Debian's packages, installed by
# scripts/install-deps.sh); glibc's malloc is the process's own.
_LIBDIR = "/usr/lib/" + (sysconfig.get_config_var("MULTIARCH") or "x86_64-linux-gnu")
_ALLOCATORS = {"tcmalloc": _LIBDIR + "/libtcmalloc_minimal.so.4",
               "jemalloc": _LIBDIR + "/libjemalloc.so.2"}
_TORCH_ENV = {}


def pytorch_malloc():
    """Gives the PyTorch runs tcmalloc (LD_PRELOAD, through torch_env()), as
    Intel's PyTorch CPU tuning guide and IPEX's launcher do, and says which
    allocator they use. With glibc's malloc an eager step frees and maps
    its large temporaries again each step, and in a VM each page fault is
    dear: on 2 cores of an AMD Zen 5 PyTorch's bf16 autocast step of the
    6-layer d=384 GPT took 0.41-0.43 s with glibc, 0.23 with tcmalloc and
    0.53-0.65 with jemalloc (docs/performance.md), which would flatter every
    ratio against PyTorch. DSC_BENCH_TORCH_MALLOC=glibc|tcmalloc|jemalloc
    chooses another; dsrt plans its memory in one arena and runs as it
    ships, with the process's own malloc."""
    want = os.environ.get("DSC_BENCH_TORCH_MALLOC", "tcmalloc")
    if want == "glibc":
        return "PyTorch's allocator: glibc malloc (DSC_BENCH_TORCH_MALLOC=glibc)"
    if want not in _ALLOCATORS:
        sys.exit(f"bench: DSC_BENCH_TORCH_MALLOC={want}: expected glibc, tcmalloc or jemalloc")
    lib = _ALLOCATORS[want]
    if not os.path.exists(lib):
        sys.exit(f"bench: {lib} is missing (scripts/install-deps.sh installs it); "
                 "DSC_BENCH_TORCH_MALLOC=glibc runs PyTorch with glibc's malloc instead")
    given = [p for p in os.environ.get("LD_PRELOAD", "").split(":") if p and p != lib]
    _TORCH_ENV["LD_PRELOAD"] = ":".join([lib] + given)
    return f"PyTorch's allocator: {want} ({lib} preloaded)"


def torch_env():
    """The environment of a PyTorch process: this one's and pytorch_malloc()'s allocator."""
    return dict(os.environ, **_TORCH_ENV)


def plain_env():
    """The environment of any other process (dsrt, dsc): without the
    allocator that pytorch_blas(in_process=True) preloaded into this one."""
    env = dict(os.environ)
    own = env.pop("DSC_BENCH_PRELOADED", None)
    if own is not None:
        rest = [p for p in env.get("LD_PRELOAD", "").split(":") if p and p != own]
        if rest:
            env["LD_PRELOAD"] = ":".join(rest)
        else:
            env.pop("LD_PRELOAD", None)
    return env


def pytorch_blas(in_process=False):
    """PyTorch at its best, before anything imports torch: OpenBLAS's best
    kernels for this CPU (_pytorch_openblas) and tcmalloc (pytorch_malloc,
    for the Python processes that run() and run_measured() start); the
    report's lines on both. A bench that imports torch itself passes
    in_process=True: it is started again with the allocator preloaded
    (the commands it runs then get plain_env())."""
    malloc = pytorch_malloc()
    lib = _TORCH_ENV.get("LD_PRELOAD", "").split(":")[0]
    if in_process and lib and "DSC_BENCH_PRELOADED" not in os.environ:
        env = dict(torch_env(), DSC_BENCH_PRELOADED=lib)
        os.execve(PY, [PY, os.path.abspath(sys.argv[0])] + sys.argv[1:], env)
    return _pytorch_openblas() + "\n" + malloc


def timing_args(p):
    """The options of a bench that alternates dsrt's binary and PyTorch:
    --threads, --reps and --ms (each figure the best of --reps repetitions
    of about --ms milliseconds of calls), --rounds, --markdown."""
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--ms", type=float, default=200)
    p.add_argument("--rounds", type=int, default=3,
                   help="dsrt and PyTorch alternate this many times; each figure is its best round")
    p.add_argument("--markdown", help="also write the tables to this file")


def best_ms(call, reps, ms):
    """Milliseconds per call of the best of `reps` repetitions of enough
    calls to last about `ms` milliseconds, after a warm-up call
    (test/runtime/kernels/BenchUtil.h times dsrt's side the same way)."""
    call()
    t0 = time.perf_counter()
    call()
    calls = max(1, int(ms / 1e3 / max(time.perf_counter() - t0, 1e-9)))
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(calls):
            call()
        best = min(best, (time.perf_counter() - t0) / calls)
    return best * 1e3


def run(cmd, **kw):
    """stdout of `cmd`; exits with its output when it fails."""
    if "env" not in kw:
        kw["env"] = torch_env() if cmd and cmd[0] == PY else plain_env()
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode:
        sys.exit(f"bench: {' '.join(cmd)} failed:\n{r.stdout}\n{r.stderr}")
    return r.stdout


def token_file(work, sources=()):
    """Byte tokens (models/make_tokens.py) of `sources` (files or folders;
    none: make_tokens.py's default, the project's own text and
    /usr/share/common-licenses)."""
    run([PY, os.path.join(REPO, "models", "make_tokens.py"), "-o", os.path.join(work, "tok")]
        + list(sources))
    return os.path.join(work, "tok", "train.bin")


def report(text, markdown):
    """Prints the tables and, with --markdown FILE, writes them there."""
    print("\n" + text)
    if markdown:
        with open(markdown, "w") as f:
            f.write(text)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 24), b""):
            h.update(chunk)
    return h.hexdigest()


# --------------------------------------------------------------------------
# Running a process: its peak RSS (and each rank's), the machine's load

def busy_cpu_seconds():
    """CPU seconds all processes of the machine have used (/proc/stat)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v[:8]) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")  # minus idle, iowait


def _hwm_mib(pid):
    """VmHWM (the process's peak RSS so far) in MiB, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except (OSError, ValueError):
        pass
    return None


def run_measured(cmd, log, rank_pids=None, interval=0.05):
    """Runs cmd with stdout+stderr to `log`. Returns (stdout text, ru_maxrss
    in MiB of that process from os.wait4 -- with the processes it started
    and waited for, the largest of them --, the mean number of cores other
    processes kept busy meanwhile, {rank: peak RSS MiB}). The last is
    sampled while it runs (every `interval` s) from the VmHWM of the pids
    in the files matching the glob `rank_pids` (dsrt writes
    RUN/ranks/N.pid for each rank it starts); empty without it. A rank's
    figure is its high-water mark at the last sample before it exited.
    Exits with the log's tail if the command fails."""
    busy0, t0 = busy_cpu_seconds(), time.monotonic()
    ranks = {}
    with open(log, "w") as f:
        p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT,
                             env=torch_env() if cmd[0] == PY else plain_env())
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG if rank_pids else 0)
            if pid:
                break
            for path in glob.glob(rank_pids):
                try:
                    rank = int(os.path.basename(path).split(".")[0])
                    with open(path) as pf:
                        rpid = int(pf.read().strip())
                except (OSError, ValueError):
                    continue  # not written yet
                hwm = _hwm_mib(rpid)
                if hwm is not None:
                    ranks[rank] = max(ranks.get(rank, 0.0), hwm)
            time.sleep(interval)
        p.returncode = os.waitstatus_to_exitcode(status)
    other = max(0.0, (busy_cpu_seconds() - busy0 - ru.ru_utime - ru.ru_stime)
                / max(time.monotonic() - t0, 1e-9))
    out = open(log).read()
    if p.returncode:
        sys.exit(f"bench: {' '.join(cmd)} failed ({p.returncode}):\n{out[-4000:]}")
    return out, ru.ru_maxrss / 1024.0, other, ranks


# --------------------------------------------------------------------------
# What dsrt prints and writes

def metrics(outdir):
    """The rows of a dsrt run's metrics.csv (step, loss, step_time_s, ...)."""
    with open(os.path.join(outdir, "metrics.csv")) as f:
        return list(csv.DictReader(f))


def median_step(rows, warmup):
    """Median step_time_s of the rows after the first `warmup` (the timed steps)."""
    return statistics.median(float(r["step_time_s"]) for r in rows[warmup:])


def dsrt_peak_rss(out):
    """dsrt's `done ..., peak RSS N MiB` (on several ranks: the largest rank's)."""
    return int(re.search(r"peak RSS (\d+) MiB", out).group(1))


def dsrt_comm(out):
    """dsrt's `communication per step` line: {kind: (calls, elements)}, the
    elements in the ZeRO paper's units (an all-reduce of n counts 2n); {}
    when it printed none (one rank)."""
    m = re.search(r"^dsrt: communication per step: (.*)$", out, re.M)
    if not m:
        return {}
    return {k: (int(c), int(e)) for k, c, e in re.findall(
        r"(all_reduce|reduce_scatter|all_gather|send|recv) (\d+) calls? (\d+) elements",
        m.group(1))}


# --------------------------------------------------------------------------
# The simulator's benches (bench/simulate.py, bench/auto.py)

def hardware_file(work, given):
    """`given`, or this machine's hardware file measured by bench/calibrate.py."""
    if given:
        return given
    hw = os.path.join(work, "this-machine.json")
    print("== calibrating this machine (bench/calibrate.py)", flush=True)
    run([PY, os.path.join(REPO, "bench", "calibrate.py"), "-o", hw])
    return hw


def main_job_gpt(work):
    """The main job's GPT (scripts/run-main.sh): 4 layers, d=128, 4 heads,
    seq 64, vocabulary 256, micro-batch 8, dropout 0.1."""
    model = os.path.join(work, "gpt.onnx")
    run([PY, os.path.join(REPO, "models", "gpt.py"), "--size", "tiny", "--layers", "4",
         "--d-model", "128", "--heads", "4", "--vocab", "256", "--seq", "64", "--batch", "8",
         "--dropout", "0.1", "-o", model])
    return model


def repeated_step(plan, data, steps, repeats, out_prefix):
    """dsrt `plan` run `repeats` times for `steps` steps: each run's median
    step_time_s after its first third; returns (median of the runs, min, max)."""
    runs = []
    for k in range(repeats):
        out_dir = f"{out_prefix}{k}"
        run([os.path.join(BIN, "dsrt"), plan, "--data", data, "--steps", str(steps),
             "--out", out_dir])
        t = [float(r["step_time_s"]) for r in metrics(out_dir)]
        runs.append(statistics.median(t[len(t) // 3:]))
    return statistics.median(runs), min(runs), max(runs)
