"""Run ``qkv train`` and kill the process with SIGKILL in the middle of writing the checkpoint of
step K (after its weights and optimiser state are on disk, before it is complete).

    python tests/cli/crash_in_save.py K train CONFIG --set ...
"""

import os
import signal
import sys

from qkv.cli.main import main
from qkv.training import state, trainer

K = int(sys.argv[1])
save_tensors, save_checkpoint = state._save_tensors, state.save_checkpoint


def dying_save_tensors(tensors, path):
    save_tensors(tensors, path)
    if path.name == "optimizer.safetensors":
        os.kill(os.getpid(), signal.SIGKILL)


def crashing_save_checkpoint(run_dir, *, loop, **kwargs):
    if loop.step == K:
        state._save_tensors = dying_save_tensors
    return save_checkpoint(run_dir, loop=loop, **kwargs)


trainer.save_checkpoint = crashing_save_checkpoint
sys.exit(main(sys.argv[2:]))
