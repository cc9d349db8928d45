"""The machine's fixed sizes, shared by the toolchain, the interpreters and the GPU circuit.

Every number here is a resource a kernel or launch can exceed; exceeding one is a ResourceError
that names the number. docs/ISA.md explains each choice.
"""

WARP_LANES = 4  # lanes per warp
MAX_WARPS = 4  # warps per thread block
MAX_THREADS = WARP_LANES * MAX_WARPS  # threads per block (1-D or 2-D, x*y <= 16)
MAX_GRID_BLOCKS = 16  # thread blocks per grid (x*y), run one after another

NUM_REGS = 16  # r0..r15 per lane, r0 reads zero
NUM_PREDS = 4  # p0..p3 per lane
WORD_BYTES = 4

GLOBAL_WORDS = 128  # byte addresses 0..511; word 0 is the reserved null word
GLOBAL_FIRST_WORD = 1  # first word the host may allocate
SHARED_WORDS = 64  # per thread block, byte addresses 0..255, undefined when a block starts
LOCAL_WORDS = 16  # per thread, register spill slots owned by the lowering
PARAM_WORDS = 16  # kernel parameters, one 32-bit word each (pointers are byte addresses)

ROM_BLOCKS = 128  # program ROM: machine blocks (a 128-row GDN head holds them)
BLOCK_SLOTS = 4  # instructions per machine block (plus its terminator)

DEFAULT_STEP_LIMIT = 20_000  # block executions per launch before a runaway launch is stopped
