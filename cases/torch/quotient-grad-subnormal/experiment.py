"""PyTorch's derivative of a quotient a / b about b is -g * ((a / b) / b): where a / b^2 falls
under float32's normal range (2^-126) the intermediate is subnormal and keeps only the bits
above 2^-149, so the gradient loses relative precision although every term of the answer is a
normal number.

Local response normalization, Output = x / d^Beta with d = Bias + Alpha / n * (window sum of
x^2), is such a quotient: its gradient is g / d^Beta - (2 Alpha Beta / n) x * (window sum of
g x d^(-Beta-1)). With Beta 2 and x ~ 4e5, d ~ 3e11: x / d^2 / d^2 ~ 4e-41 (subnormal), where the
closed form's g x d^-3 ~ 2e-30 is normal. Autograd errs 1.9e-4 relative where a float32
evaluation of the closed form errs 1e-7 (the dmlconform case: LRN_GRAD exact_statistics, Alpha 4,
Beta 2, Bias 1, LocalSize 4, values 2.3e5 to 4.1e5).

Run: python cases/torch/quotient-grad-subnormal/experiment.py (torch and numpy only).
"""

import numpy as np
import torch

print(f"torch {torch.__version__}")


def lrn_1d(x):
    """One window covering every element: x / (1 + sum(x^2))^2 (Alpha / n 1, Beta 2, Bias 1)."""
    return x / (1.0 + (x * x).sum()) ** 2


def exact(x, g):
    """float64: g d^-2 - 4 x sum(g x) d^-3, d = 1 + sum(x^2)."""
    x, g = x.astype(np.float64), g.astype(np.float64)
    d = 1.0 + np.sum(x * x)
    return g * d**-2 - 4.0 * x * np.sum(g * x) * d**-3


def closed_form_f32(x, g):
    """The same formula in float32, every step normal."""
    x, g = torch.tensor(x), torch.tensor(g)
    d = 1.0 + (x * x).sum()
    return (g * d**-2 - 4.0 * x * (g * x).sum() * d**-3).numpy()


g = np.array([-0.2, -0.2, -0.2], np.float32)
print(f"{'c':>8} {'a/b^2 (torch)':>14} {'autograd rel err':>17} {'closed form f32':>16}")
worst = {}
for c in (1e2, 1e3, 1e4, 1e5, 2e5, 4e5):
    x = (c * np.array([1.0, 0.55, 0.78])).astype(np.float32)
    xt = torch.tensor(x, requires_grad=True)
    (got,) = torch.autograd.grad(lrn_1d(xt), (xt,), torch.tensor(g))
    want = exact(x, g)
    d2 = float((1.0 + (xt.detach() ** 2).sum()) ** 2)
    inter = float(np.float32(x[0]) / np.float32(d2) / np.float32(d2))
    e_auto = float(np.max(np.abs(got.numpy() / want - 1)))
    e_cf = float(np.max(np.abs(closed_form_f32(x, g) / want - 1)))
    worst[c] = (e_auto, e_cf)
    print(f"{c:8.0e} {inter:14.3e} {e_auto:17.2e} {e_cf:16.2e}")

print("\nautograd's chain, written out in float32 with the quotient rule as -g * ((a / b) / b), c = 4e5:")
x = (4e5 * np.array([1.0, 0.55, 0.78])).astype(np.float32)
xt = torch.tensor(x, requires_grad=True)
(got,) = torch.autograd.grad(lrn_1d(xt), (xt,), torch.tensor(g))
f = np.float32
d = f(1.0) + np.sum(x * x, dtype=np.float32)
p = d * d  # d ** 2
dp = np.sum(-g * ((x / p) / p), dtype=np.float32)  # the subnormal step
dd = dp * (f(2.0) * d)
manual = g / p + dd * (f(2.0) * x)
print("  (x / p) / p =", (x / p) / p, "(float32's normal range ends at 1.18e-38)")
print("  autograd:", got.numpy(), " written out:", manual, " equal:", np.array_equal(got.numpy(), manual))
print("  exact:   ", exact(x, g))

e_auto, e_cf = worst[4e5]
print("subnormal quotient derivative reproduced" if e_auto > 1e-5 and e_cf < 1e-6 else "not reproduced")
