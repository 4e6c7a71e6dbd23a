# -*- Python -*-
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "DSC"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
# .mlir: dialect and pass tests; .onnxtxt: importer tests in ONNX's textual
# syntax ('#' lines are comments there); .test: scripts over PyTorch exports.
config.suffixes = [".mlir", ".onnxtxt", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.dsc_obj_root, "test")

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.add_tool_substitutions(["dsc", "dsc-opt", "dsrt"], [config.dsc_tools_dir])
config.substitutions.append(("%models", os.path.join(config.dsc_src_root, "models")))
config.substitutions.append(("%scripts", os.path.join(config.dsc_src_root, "scripts")))
config.substitutions.append(("%repo", config.dsc_src_root))
config.substitutions.append(("%bindir", config.dsc_tools_dir))
config.substitutions.append(("%torch_python", config.torch_python))

# Exports through Debian's torch: tests that need it say REQUIRES: torch.
if config.torch_python and os.path.exists(config.torch_python):
    import subprocess
    probe = subprocess.run([config.torch_python, "-c", "import torch, onnx"],
                           capture_output=True)
    if probe.returncode == 0:
        config.available_features.add("torch")
    else:
        lit_config.warning("torch/onnx not importable by %s: model tests skipped"
                           % config.torch_python)
    # tools/plot (scripts/install-deps.sh installs python3-matplotlib).
    if subprocess.run([config.torch_python, "-c", "import matplotlib"],
                      capture_output=True).returncode == 0:
        config.available_features.add("matplotlib")
    else:
        lit_config.warning("matplotlib not importable by %s: plot tests skipped (run "
                           "scripts/install-deps.sh)" % config.torch_python)

# The corpus of real ds_configs (third-party files, read where they lie,
# never copied): ../shared/ds_configs beside the checkout, or
# DSC_DS_CONFIGS. Tests that read it say REQUIRES: ds_configs.
ds_configs = os.environ.get("DSC_DS_CONFIGS",
                            os.path.join(config.dsc_src_root, "..", "shared", "ds_configs"))
if os.path.isdir(ds_configs):
    config.available_features.add("ds_configs")
    config.substitutions.append(("%ds_configs", os.path.abspath(ds_configs)))
else:
    lit_config.warning("no ds_config corpus at %s: ds-config-corpus.test skipped (set "
                       "DSC_DS_CONFIGS)" % ds_configs)

# What a PyTorch 2.11 user exports (dynamo ONNX, .pt2, legacy ONNX,
# TorchScript), third-party files read where they lie: ../shared/pytorch-2.11
# beside the checkout, or DSC_PYTORCH_211. Tests that read them say
# REQUIRES: pytorch-2.11.
pt211 = os.environ.get("DSC_PYTORCH_211",
                       os.path.join(config.dsc_src_root, "..", "shared", "pytorch-2.11"))
if os.path.isfile(os.path.join(pt211, "reference.json")):
    config.available_features.add("pytorch-2.11")
    config.substitutions.append(("%pt211", os.path.abspath(pt211)))
else:
    lit_config.warning("no PyTorch 2.11 exports at %s: their import and parity tests are "
                       "skipped (set DSC_PYTORCH_211)" % pt211)

# GCC builds' kernels use libgomp, the OpenMP runtime oneDNN links; clang
# builds (the sanitizer build) also load LLVM's libomp beside it.
if getattr(config, "dsc_cxx_compiler_id", "") == "GNU":
    config.available_features.add("libgomp")

# dsc's TorchScript frontend is built where libtorch-dev is installed
# (scripts/install-deps.sh installs it); its tests say REQUIRES: torchscript.
if getattr(config, "dsc_torchscript", "") in ("ON", "1", "TRUE", "YES"):
    config.available_features.add("torchscript")
else:
    lit_config.warning("dsc was built without libtorch: the TorchScript frontend's tests are "
                       "skipped (apt-get install libtorch-dev, then configure again)")

# Kernel-path pins pass through, so the suite can run with oneDNN held to
# an ISA level (ONEDNN_MAX_CPU_ISA=AVX2, AVX512_CORE, AVX512_CORE_BF16, ...)
# and dsrt's conversions to one (DSRT_HALF_ISA=portable|avx512f).
for var in ("ONEDNN_MAX_CPU_ISA", "DSRT_HALF_ISA"):
    if var in os.environ:
        config.environment[var] = os.environ[var]

# A small tmpfs stands for a full disk (root only; CI runs as root).
if os.geteuid() == 0:
    import subprocess
    import tempfile
    probe_dir = tempfile.mkdtemp()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4k", "tmpfs", probe_dir],
                      capture_output=True).returncode == 0:
        subprocess.run(["umount", probe_dir], capture_output=True)
        config.available_features.add("tmpfs")
    os.rmdir(probe_dir)

# The multi-host tests (REQUIRES: testbed) make hosts of network namespaces
# with an sshd each (scripts/testbed.sh): root, iproute2 and openssh-server.
testbed = subprocess.run([os.path.join(config.dsc_src_root, "scripts", "testbed.sh"), "check"],
                         capture_output=True, text=True)
if testbed.returncode == 0:
    config.available_features.add("testbed")
else:
    lit_config.note("no multi-host test bed here (%s): the multi-host tests "
                    "(REQUIRES: testbed) are skipped" % testbed.stdout.strip().replace("testbed: ", ""))

# dsrt's --device defaults to auto (the GPU where there is one): the suite
# pins the CPU, whose results its tests state; GPU tests say --device cuda
# and REQUIRES: cuda-device, present where nvidia-smi lists a GPU.
config.environment["DSRT_DEVICE"] = "cpu"
import shutil
import subprocess
if shutil.which("nvidia-smi") and subprocess.run(
        ["nvidia-smi", "-L"], capture_output=True).returncode == 0:
    config.available_features.add("cuda-device")
else:
    lit_config.note("no CUDA device (nvidia-smi lists none): the GPU tests "
                    "(REQUIRES: cuda-device) are skipped")
