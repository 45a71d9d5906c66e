"""Weighted depth: the most matmul/convolution-like nodes on one path of the autograd graph."""

from __future__ import annotations

from typing import Any

# Backward nodes that count one step of weighted depth: the matrix-multiply-like ops that make
# up the sequential chain of a network. Names are matched without the trailing
# ``Backward<n>``. Scaled-dot-product attention is two dependent matmuls (QK^T, then AV);
# counting it as 2 gives the same depth as the unfused math path, which shows two Bmm nodes.
_DEPTH_WEIGHTS: dict[str, int] = {
    "Convolution": 1,
    "Addmm": 1,
    "Mm": 1,
    "Bmm": 1,
    "Baddbmm": 1,
    "Addbmm": 1,
    "Linear": 1,
    "Embedding": 1,
    "EmbeddingBag": 1,
    "_EmbeddingBag": 1,
    "ScaledDotProductAttention": 2,
    "ScaledDotProductFlashAttention": 2,
    "ScaledDotProductFlashAttentionForCpu": 2,
    "ScaledDotProductEfficientAttention": 2,
    "ScaledDotProductCudnnAttention": 2,
    "FlashAttention": 2,
    "EfficientAttention": 2,
}


def _weighted_depth(root: Any) -> int | None:
    """Longest path through an autograd graph, counting matmul/convolution-like nodes.

    Parameters
    ----------
    root : torch.autograd.graph.Node or None
        ``tensor.grad_fn`` of an output.

    Returns
    -------
    int or None
        The most weighted nodes on one path from ``root`` to a leaf; None if ``root`` is None.
    """
    if root is None:
        return None
    # Memoised post-order DFS with an explicit stack: graphs of long sequences or very deep
    # networks have tens of thousands of nodes on one path.
    best: dict[Any, int] = {}
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if node in best:
            continue
        children = [child for child, _ in node.next_functions if child is not None]
        if not expanded:
            stack.append((node, True))
            stack.extend((child, False) for child in children if child not in best)
            continue
        below = max((best[child] for child in children), default=0)
        best[node] = _node_weight(node) + below
    return best[root]


def _node_weight(node: Any) -> int:
    name = node.name()
    head, marker, _ = name.rpartition("Backward")
    if not marker:
        return 0
    return _DEPTH_WEIGHTS.get(head, 0)
