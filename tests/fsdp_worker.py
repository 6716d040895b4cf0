"""Run by tests/test_fsdp.py under `torchrun --nproc_per_node 2`: the model sharded with FSDP2 (torch's public
`fully_shard`, one group per encoder/decoder layer and one for the rest, the tied embeddings included) on gloo / CPU
trains like one unsharded process on the same global batch, and gathers back into an ordinary saved model."""

import json
import sys

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

from vanilla_transformer import VanillaTransformerConfig, VanillaTransformerForConditionalGeneration


def batch(rank: int):
    g = torch.Generator().manual_seed(rank)
    return torch.randint(4, 99, (4, 9), generator=g), torch.randint(4, 99, (4, 6), generator=g)


def main(out_dir: str):
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    config = VanillaTransformerConfig.from_preset("tiny", dropout=0.0)
    torch.manual_seed(0)
    model = VanillaTransformerForConditionalGeneration(config)
    torch.manual_seed(0)
    reference = VanillaTransformerForConditionalGeneration(config)  # every rank: one process on the global batch
    total = sum(p.numel() for p in model.parameters())
    mesh = init_device_mesh("cpu", (world,))
    for layer in [*model.model.encoder.layers, *model.model.decoder.layers]:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    local = sum(p.to_local().numel() for p in model.parameters())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.5)
    losses, reference_losses = [], []
    for step in range(3):
        input_ids, labels = batch(rank + world * step)
        loss = model(input_ids=input_ids, labels=labels).loss  # FSDP averages the ranks' gradients
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.detach())
        reference_loss = (
            sum(reference(input_ids=b[0], labels=b[1]).loss for b in (batch(r + world * step) for r in range(world)))
            / world
        )
        reference_loss.backward()
        reference_optimizer.step()
        reference_optimizer.zero_grad()
        reference_losses.append(reference_loss.item())
    mean_losses = torch.stack(losses)
    dist.all_reduce(mean_losses)
    full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    if rank == 0:
        reference.save_pretrained(f"{out_dir}/reference")
        reference.save_pretrained(f"{out_dir}/sharded", state_dict=full)  # gathered shards, an ordinary directory
        with open(f"{out_dir}/result.json", "w") as f:
            json.dump(
                {
                    "total": total,
                    "local": local,
                    "losses": (mean_losses / world).tolist(),
                    "reference_losses": reference_losses,
                },
                f,
            )
    dist.barrier()  # no rank tears the group down while another still works (a gloo abort at exit otherwise)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
