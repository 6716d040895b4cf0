"""CPU kernels for training: dropout (section 5.4) and the token cross-entropy, each the same function as torch's
(`F.dropout`, `F.cross_entropy`) computed a faster way on CPUs (GPUs run torch's own), and the token loss built on it
(`token_loss`, `item_count`).

Under `torch.compile` on a CPU the kernels run as custom operators (`torch.library.custom_op`), which the compiler
calls as they are instead of tracing into them: the dropout mask and the loss with its gradient. Without them, a
compiled CPU step would run torch's slower dropout and cross-entropy.

The model file imports this file relatively, so `save_pretrained` copies it beside the weights with the model's code
(`trust_remote_code`). Each kernel is kept because it speeds up a whole training step (`python scripts/benchmark.py
--tasks cpu-kernels`, docs/benchmarks.md).
"""

import re

import torch
import torch.nn.functional as F

# One operator namespace per copy of this file: the package's, and each model directory's (trust_remote_code) copy,
# which may be imported into the same process.
NAMESPACE = re.sub(r"\W", "_", __name__)


def keep_mask(x: torch.Tensor, p: float) -> torch.Tensor:
    """A boolean mask of x's shape keeping each element with probability 1 - p (p rounded to a multiple of 2^-16):
    16 random bits per element, taken from 64-bit random integers (`F.dropout` draws one Bernoulli sample per element
    on CPUs, several times slower)."""
    dropped = round(p * 65536)
    bits = torch.empty((x.numel() + 3) // 4, dtype=torch.int64, device=x.device).random_(-(2**63), 2**63 - 1)
    return bits.view(torch.int16)[: x.numel()].view(x.shape) >= dropped - 32768  # uniform over [-2^15, 2^15)


@torch.library.custom_op(f"{NAMESPACE}::keep_mask", mutates_args=(), device_types="cpu")
def keep_mask_op(x: torch.Tensor, p: float) -> torch.Tensor:
    """`keep_mask` as an operator the compiler does not trace into. It reads x's shape only; taking x itself makes
    the calls for different tensors differ, so the compiler cannot merge their masks into one."""
    return keep_mask(x, p)


@keep_mask_op.register_fake
def keep_mask_shape(x, p):
    return torch.empty_like(x, dtype=torch.bool)


def apply_dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """`F.dropout(x, p, training)`, with `keep_mask`'s mask on CPUs (the scale exact for the rounded p), drawn by the
    operator in eager and compiled mode alike."""
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu":
        return F.dropout(x, p, training=True)
    return x * keep_mask_op(x, p) * (65536 / (65536 - round(p * 65536)))


def cross_entropy(logits: torch.Tensor, labels: torch.Tensor, count, label_smoothing: float = 0.0) -> torch.Tensor:
    """`F.cross_entropy(logits.float(), labels, ignore_index=-100, reduction="sum", label_smoothing=...) / count`.
    On CPUs fused: eager, `FusedCrossEntropy`, which hands its one gradient to autograd scaled in place (no
    gradient-sized product for the usual `loss.backward()`); compiled, `loss_and_gradient_op`, whose traced backward
    cannot look at the incoming gradient. On GPUs torch's, a few large kernels without host syncs (the fused row
    chunks are sized for a CPU cache: thousands of small launches there)."""
    if logits.device.type != "cpu":
        return plain_cross_entropy(logits, labels, count, label_smoothing)
    if torch.compiler.is_compiling():
        count = torch.as_tensor(count, dtype=torch.float32)
        return loss_and_gradient_op(logits, labels, count, float(label_smoothing), logits.requires_grad)[0]
    return FusedCrossEntropy.apply(logits, labels, float(label_smoothing), count)


def plain_cross_entropy(logits: torch.Tensor, labels: torch.Tensor, count, label_smoothing: float = 0.0):
    """The same loss as torch computes it (what `cross_entropy` runs off CPUs, and what the benchmark compares)."""
    loss = F.cross_entropy(
        logits.float().flatten(0, -2),
        labels.flatten(),
        ignore_index=-100,
        reduction="sum",
        label_smoothing=label_smoothing,
    )
    return loss / count


def loss_and_gradient(logits: torch.Tensor, labels: torch.Tensor, count, label_smoothing: float, needs_grad: bool):
    """The loss (fp32 scalar) and, if `needs_grad`, its gradient, (softmax - smoothed one-hot) / count in the logits'
    dtype, computed together in fp32 row chunks that stay in cache. Unfused, bf16 training spends as long on the loss
    over the vocabulary (an fp32 copy, log-softmax, its backward, a zero-filled gradient) as on the output projection
    itself."""
    vocab = logits.shape[-1]
    flat, target = logits.reshape(-1, vocab), labels.reshape(-1, 1)
    ignored = target == -100  # (N, 1)
    target = target.masked_fill(ignored, 0)
    total = torch.zeros((), dtype=torch.float32, device=logits.device)
    grad = torch.empty_like(flat) if needs_grad else None
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
    return total * inverse_count, grad


class FusedCrossEntropy(torch.autograd.Function):
    """`loss_and_gradient` for autograd: the one gradient is handed to autograd (scaled in place), so backward through
    it twice (`retain_graph`) raises."""

    @staticmethod
    def forward(ctx, logits, labels, label_smoothing: float, count):
        loss, grad = loss_and_gradient(logits, labels, count, label_smoothing, ctx.needs_input_grad[0])
        ctx.save_for_backward(grad)
        ctx.logits_shape, ctx.backward_done = logits.shape, False
        return loss

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_loss):
        if ctx.backward_done:
            raise RuntimeError(
                "Backward through the fused cross-entropy of vanilla-transformer ran twice "
                "(retain_graph=True); it keeps one gradient. Run the forward pass again instead."
            )
        ctx.backward_done = True
        (grad,) = ctx.saved_tensors
        if grad_loss.device.type != "cpu" or grad_loss.item() != 1.0:  # the usual loss.backward() needs no pass
            grad.mul_(grad_loss.to(grad.dtype))
        return grad.view(ctx.logits_shape), None, None, None


@torch.library.custom_op(f"{NAMESPACE}::loss_and_gradient", mutates_args=(), device_types="cpu")
def loss_and_gradient_op(
    logits: torch.Tensor, labels: torch.Tensor, count: torch.Tensor, label_smoothing: float, needs_grad: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """`loss_and_gradient` as an operator the compiler does not trace into; the gradient has the logits' shape (an
    empty tensor when not needed)."""
    loss, grad = loss_and_gradient(logits, labels, count, label_smoothing, needs_grad)
    return loss, grad.view(logits.shape) if grad is not None else logits.new_empty(0)


@loss_and_gradient_op.register_fake
def loss_and_gradient_shapes(logits, labels, count, label_smoothing, needs_grad):
    return logits.new_empty((), dtype=torch.float32), logits.new_empty(logits.shape if needs_grad else 0)


def loss_and_gradient_context(ctx, inputs, output):
    ctx.save_for_backward(output[1])


def loss_and_gradient_backward(ctx, grad_loss, grad_of_gradient):
    (grad,) = ctx.saved_tensors
    return grad * grad_loss.to(grad.dtype), None, None, None, None


loss_and_gradient_op.register_autograd(loss_and_gradient_backward, setup_context=loss_and_gradient_context)


def may_read_values(tensor: torch.Tensor) -> bool:
    """Whether a forward may read a tensor's values on the host (a check, a choice): never while compiled or exported
    (no data-dependent branches), and on an accelerator not while training (each read waits for the device)."""
    return not torch.compiler.is_compiling() and (tensor.device.type == "cpu" or not torch.is_grad_enabled())


def token_loss(logits: torch.Tensor, labels: torch.Tensor, num_items_in_batch=None, label_smoothing: float = 0.0):
    """Cross-entropy over tokens whose label is not -100 (with label smoothing, section 5.4).

    Mean over this batch's tokens, or, when Trainer passes `num_items_in_batch` (the tokens of every micro-batch and
    process of one optimizer step), the token sum divided by it, so gradient accumulation and data parallelism weigh
    each token the same as one big batch would.
    """
    if labels.shape != logits.shape[:-1]:
        raise ValueError(
            f"labels have shape {tuple(labels.shape)} but the logits have shape {tuple(logits.shape[:-1])}."
        )
    labels = labels.to(logits.device)
    return cross_entropy(logits, labels, item_count(labels, num_items_in_batch, logits.device), label_smoothing)


def item_count(labels: torch.Tensor, num_items_in_batch=None, device=None):
    """What a loss summed over labelled tokens is divided by: `num_items_in_batch` (Trainer's count over the whole
    optimizer step), or this batch's labelled tokens when it is not given."""
    if num_items_in_batch is None:
        num_items_in_batch = (labels != -100).sum().clamp(min=1)
    return num_items_in_batch.to(device) if isinstance(num_items_in_batch, torch.Tensor) else num_items_in_batch
