"""CPU kernels for training: dropout (section 5.4) and the token cross-entropy, each the same function as torch's
(`F.dropout`, `F.cross_entropy`) computed a faster way on CPUs. GPUs and compiled graphs run torch's own.

The model file imports this file relatively, so `save_pretrained` copies it beside the weights with the model's code
(`trust_remote_code`). Each kernel is kept because it speeds up a whole training step (`python scripts/benchmark.py
--tasks cpu-kernels`, docs/benchmarks.md).
"""

import torch
import torch.nn.functional as F


def apply_dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """`F.dropout(x, p, training)`, but on CPUs the mask comes from 64-bit random integers, 16 bits per element (p
    rounded to a multiple of 2^-16, the scale exact for it): `F.dropout` draws one Bernoulli sample per element there.
    """
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu" or torch.compiler.is_compiling():
        return F.dropout(x, p, training=True)
    dropped = round(p * 65536)
    bits = torch.empty((x.numel() + 3) // 4, dtype=torch.int64, device=x.device).random_(-2**63, 2**63 - 1)
    keep = bits.view(torch.int16)[: x.numel()].view(x.shape) >= dropped - 32768  # uniform over [-2^15, 2^15)
    return x * keep * (65536 / (65536 - dropped))


def cross_entropy(logits: torch.Tensor, labels: torch.Tensor, count, label_smoothing: float = 0.0) -> torch.Tensor:
    """`F.cross_entropy(logits.float(), labels, ignore_index=-100, reduction="sum", label_smoothing=...) / count`.
    On CPUs fused (`FusedCrossEntropy`); on GPUs torch's, a few large kernels without host syncs (the fused row
    chunks are sized for a CPU cache: thousands of small launches there)."""
    if logits.device.type == "cpu" and not torch.compiler.is_compiling():
        return FusedCrossEntropy.apply(logits, labels, float(label_smoothing), count)
    return plain_cross_entropy(logits, labels, count, label_smoothing)


def plain_cross_entropy(logits: torch.Tensor, labels: torch.Tensor, count, label_smoothing: float = 0.0):
    """The same loss as torch computes it (what `cross_entropy` runs off CPUs, and what the benchmark compares)."""
    loss = F.cross_entropy(logits.float().flatten(0, -2), labels.flatten(), ignore_index=-100, reduction="sum",
                           label_smoothing=label_smoothing)
    return loss / count


class FusedCrossEntropy(torch.autograd.Function):
    """The cross-entropy whose gradient, (softmax - smoothed one-hot) / count, is computed in the forward pass in fp32
    row chunks that stay in cache and kept in the logits' dtype. Unfused, bf16 training spends as long on the loss over
    the vocabulary (an fp32 copy, log-softmax, its backward, a zero-filled gradient) as on the output projection
    itself. The one gradient is handed to autograd (scaled in place), so backward through it twice (`retain_graph`)
    raises."""

    @staticmethod
    def forward(ctx, logits, labels, label_smoothing: float, count):
        vocab = logits.shape[-1]
        flat, target = logits.reshape(-1, vocab), labels.reshape(-1, 1)
        ignored = target == -100  # (N, 1)
        target = target.masked_fill(ignored, 0)
        total = torch.zeros((), dtype=torch.float32, device=logits.device)
        grad = torch.empty_like(flat) if ctx.needs_input_grad[0] else None
        inverse_count = 1.0 / count
        rows = max(16, 2**19 // vocab)
        for start in range(0, flat.shape[0], rows):
            chunk = slice(start, start + rows)
            z = flat[chunk].float()  # (rows, V); for fp32 logits a view of them: never written
            peak = z.amax(-1, keepdim=True)
            # exp(z - max), written straight into the gradient when it is fp32: one pass over z for loss and gradient
            probs = torch.sub(z, peak, out=grad[chunk]) if grad is not None and grad.dtype == torch.float32 else z - peak
            norm = probs.exp_().sum(-1, keepdim=True)
            lse = peak + norm.log()
            loss = lse - z.gather(1, target[chunk])  # -log p(label)
            if label_smoothing:  # eps * mean over the vocabulary of -log p (section 5.4)
                loss = (1 - label_smoothing) * loss + label_smoothing * (lse - z.mean(-1, keepdim=True))
            any_ignored = bool(ignored[chunk].any())
            total += (loss.masked_fill_(ignored[chunk], 0) if any_ignored else loss).sum()
            if grad is not None:  # (softmax - smoothed one-hot) / count
                probs.mul_(inverse_count / norm)
                if label_smoothing:
                    probs.sub_(label_smoothing * inverse_count / vocab)
                probs.scatter_add_(1, target[chunk], torch.full_like(loss, label_smoothing - 1) * inverse_count)
                if any_ignored:
                    probs.masked_fill_(ignored[chunk], 0)
                if probs.dtype != grad.dtype:
                    grad[chunk] = probs
        ctx.save_for_backward(grad)
        ctx.logits_shape, ctx.backward_done = logits.shape, False
        return total * inverse_count

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_loss):
        if ctx.backward_done:
            raise RuntimeError("Backward through the fused cross-entropy of vanilla-transformer ran twice "
                               "(retain_graph=True); it keeps one gradient. Run the forward pass again instead.")
        ctx.backward_done = True
        (grad,) = ctx.saved_tensors
        if grad_loss.device.type != "cpu" or grad_loss.item() != 1.0:  # the usual loss.backward() needs no pass
            grad.mul_(grad_loss.to(grad.dtype))
        return grad.view(ctx.logits_shape), None, None, None
