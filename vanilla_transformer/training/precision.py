"""Which precision and device a training command takes: bf16 only where it pays, the accelerator found."""

import functools
import logging
import platform
import time

import torch


def native_bf16(device_type: str = "cpu") -> bool:
    """Whether bf16 matrix products have native kernels here. x86 CPUs without AVX-512 (e.g. AVX2-only laptops)
    compute them in a reference kernel, many times slower than fp32 (docs/results.md, bf16). On x86 the kernels torch
    dispatches to say it (`ATEN_CPU_CAPABILITY=avx2` limits them); other
    architectures count as native, and `fast_bf16`'s measurement decides."""
    if device_type == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    if device_type != "cpu":
        return True
    if platform.machine().lower() in ("x86_64", "amd64", "i386", "i686", "x86"):
        return torch.backends.cpu.get_cpu_capability().startswith("AVX512")
    return True


BF16_MIN_SPEEDUP = 1.2  # below this, bf16 autocast's casts eat the gain: train in fp32


@functools.cache
def bf16_matmul_speedup() -> float:
    """How many times faster a bf16 matrix product of the small preset's size runs than an fp32 one on this CPU
    (best of 5 each; about 0.05 s). 0 where bf16 has no native kernel."""
    if not native_bf16("cpu"):
        return 0.0
    generator = torch.Generator().manual_seed(0)  # the global seed stays untouched
    a, b = torch.rand(1024, 1024, generator=generator), torch.rand(1024, 256, generator=generator)

    def best_seconds(x, y):
        x @ y  # warm-up: kernel selection, first-touch memory
        times = []
        for _ in range(5):
            start = time.perf_counter()
            x @ y
            times.append(time.perf_counter() - start)
        return min(times)

    return best_seconds(a, b) / best_seconds(a.bfloat16(), b.bfloat16())


def fast_bf16(device_type: str | None = None) -> bool:
    """Whether bf16 autocast pays here: the recipes' and the demo's default for `--bf16`. On a CPU a native bf16
    kernel is not enough, the product must also run at least BF16_MIN_SPEEDUP times faster than fp32 (CPUs with bf16
    instructions that run it slower than fp32 train slower in bf16: docs/results.md, "bf16 or fp32"). `device_type`
    None: the accelerator the Trainer will pick, else the CPU."""
    device_type = device_type or accelerator_type() or "cpu"
    if device_type != "cpu":
        return native_bf16(device_type)
    return bf16_matmul_speedup() >= BF16_MIN_SPEEDUP


def warn_if_slow_bf16(training_args, logger=None) -> None:
    if not (training_args.bf16 and training_args.device.type == "cpu") or fast_bf16("cpu"):
        return
    if native_bf16("cpu"):
        why = (
            f"a bf16 matrix product runs {bf16_matmul_speedup():.2f}x as fast as fp32 here, so bf16 autocast "
            "(which adds casts) gains nothing"
        )
    else:
        why = (
            "this CPU has no native bf16 matrix products (no AVX-512/AMX), so bf16 autocast runs many times slower "
            "than fp32 here"
        )
    (logger or logging.getLogger(__name__)).warning(f"--bf16 true: {why}; pass --bf16 false.")


def accelerator_type() -> str | None:
    """ "cuda" or "mps" when this process can use one, else None (decided when a command starts, not at import)."""
    if torch.cuda.is_available():
        return "cuda"
    if torch.backends.mps.is_available():
        return "mps"
    return None


def with_device_default(args: list[str]) -> list[str]:
    """`--use_cpu true` first when no accelerator exists and the command line does not say: without an accelerator,
    accelerate only forms a multi-process (gloo) group under torchrun when told it runs on CPUs (otherwise every
    process silently trains alone), and it lets --bf16 run on a CPU. With a GPU the Trainer takes it."""
    if accelerator_type() or any(a.split("=")[0] in ("--use_cpu", "--no_use_cpu") for a in args):
        return args
    return ["--use_cpu", "true", *args]
