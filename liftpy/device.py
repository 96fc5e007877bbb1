"""One description of an OpenCL device, for every part of the compiler that needs one.

The parameter space bounds configurations by its limits and private-memory budget, the code generator chooses
launches by them, and the runtime fills one from a live device (``liftpy.runtime.device_info``); a device
one does not have comes from a shipped profile (``liftpy/targets.json``, :func:`liftpy.params.target_profiles`).
The defaults describe a modest GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

#: 32-bit private values per work-item the parameter space allows when the device does not say: what GPUs hold
#: in registers. On a CPU, 512 -- PoCL keeps a work-group's private arrays on a thread's stack, and tuning
#: VGG-16 layer 24 crashed it (SIGSEGV) at 960 accumulators, while 28 AVX-512 registers of 16 floats (448
#: values) are the direct convolution's best.
PRIVATE_BUDGET = {"gpu": 256, "cpu": 512}


@dataclass(frozen=True)
class Device:
    """An OpenCL device's kind, limits and preferences, and where it is (for a live one)."""

    name: str = "generic GPU"
    kind: str = "gpu"  # "gpu", "cpu", "accelerator" ("/"-joined when several) or "other"
    compute_units: int = 1
    max_work_group_size: int = 256
    max_work_item_sizes: tuple[int, ...] = (256, 256, 256)
    local_mem_size: int = 32 * 1024
    global_mem_size: int = 2**32
    max_mem_alloc_size: int = 2**30
    preferred_vector_width_float: int = 4
    #: 32-bit private values per work-item a configuration may keep (a tuning-space budget, not a driver limit)
    private_mem_budget: int = PRIVATE_BUDGET["gpu"]
    platform: str = ""
    driver: str = ""
    platform_index: int = -1  # where a live device is: liftpy devices' [P:D]
    device_index: int = -1

    @property
    def is_cpu(self) -> bool:
        return "cpu" in self.kind.split("/")

    @property
    def vector_registers(self) -> int:
        """The vector registers of the device's preferred width a cost model counts a block's accumulators
        against: 32 where its preferred vectors have 16 lanes (AVX-512), else 16 (AVX2, NEON, a GPU's count
        per work-item unknown)."""
        return 32 if self.preferred_vector_width_float >= 16 else 16

    @property
    def index_type(self) -> str:
        """The C type of the kernels' sequential loop indices: ``long`` on a CPU, ``int`` elsewhere. A CPU
        addresses memory with 64-bit registers: an ``int`` index is sign-extended at every access, and the C
        compiler then cannot fold a constant offset into the addressing (PoCL 3.1 on AVX2 spent three integer
        instructions on each broadcast read of a conv1x1 block's inner loop). A GPU's 64-bit integer
        arithmetic takes several instructions where ``int``'s takes one."""
        return "long" if self.is_cpu else "int"

    def describe(self) -> str:
        where = f"[{self.platform_index}:{self.device_index}] " if self.platform_index >= 0 else ""
        return (
            f"{where}{self.name} ({self.kind}, {self.platform or 'profile'}"
            + (f", driver {self.driver}" if self.driver else "") + ")\n"
            f"    compute units {self.compute_units}, max work-group size {self.max_work_group_size}, "
            f"max work-item sizes {self.max_work_item_sizes}\n"
            f"    local memory {self.local_mem_size // 1024} KiB, global memory {self.global_mem_size // 2**20} MiB, "
            f"max allocation {self.max_mem_alloc_size // 2**20} MiB, preferred float vector width "
            f"{self.preferred_vector_width_float}"
        )
