"""A TensorFlow backend written from docs/backends.md alone: the rehearsal of a runtime the suite
was not built with (docs/runtime-findings.md, "TensorFlow"). Not a built-in backend; run it from
this directory with TensorFlow installed: ``dmlconform run --backend tfbackend:TfBackend``.

What a TF user writes: tf.nn.moments + tf.nn.batch_normalization (the folded affine map:
x * inv + (offset - mean * inv)), tf.nn.local_response_normalization for odd cross-channel
windows of at most 4096 channels (past that its band matrix, depth x depth floats, does not fit
in memory) and a convolution with ones otherwise, tf.math.l2_normalize where its epsilon means
the same (0), GradientTape for the gradients. Inputs of rank above 5 lose their size-1 axes and
have alike adjacent axes merged (TensorFlow's CPU kernels broadcast up to rank 5). FLOAT16 descs are computed in float32 and
rounded once (option float16=native: in float16).
"""

import numpy as np
import tensorflow as tf

import dmlconform as dc

tf.config.threading.set_intra_op_parallelism_threads(2)
tf.config.threading.set_inter_op_parallelism_threads(1)

F32 = tf.float32


def _act(name, x, p):
    c = lambda v: tf.constant(v, x.dtype)  # noqa: E731
    if name == "ACTIVATION_IDENTITY":
        return x
    if name == "ACTIVATION_LINEAR":
        return x * c(p["Alpha"]) + c(p["Beta"])
    if name == "ACTIVATION_SIGMOID":
        return tf.math.sigmoid(x)
    if name == "ACTIVATION_HARD_SIGMOID":
        return tf.clip_by_value(x * c(p["Alpha"]) + c(p["Beta"]), c(0.0), c(1.0))
    if name == "ACTIVATION_TANH":
        return tf.math.tanh(x)
    if name == "ACTIVATION_SCALED_TANH":
        return c(p["Alpha"]) * tf.math.tanh(c(p["Beta"]) * x)
    if name == "ACTIVATION_RELU":
        return tf.nn.relu(x)
    if name == "ACTIVATION_LEAKY_RELU":
        return tf.nn.leaky_relu(x, alpha=float(np.float32(p["Alpha"])))
    if name == "ACTIVATION_THRESHOLDED_RELU":
        return tf.where(x > c(p["Alpha"]), x, tf.zeros_like(x))
    if name == "ACTIVATION_ELU":
        if p["Alpha"] == 1.0:
            return tf.nn.elu(x)
        return tf.where(x >= c(0.0), x, c(p["Alpha"]) * tf.math.expm1(x))
    if name == "ACTIVATION_SCALED_ELU":
        return c(p["Gamma"]) * tf.where(x > c(0.0), x, c(p["Alpha"]) * tf.math.expm1(x))
    if name == "ACTIVATION_SOFTPLUS":
        s = c(p["Steepness"])
        return tf.math.softplus(s * x) / s
    if name == "ACTIVATION_PARAMETRIC_SOFTPLUS":
        return c(p["Alpha"]) * tf.math.softplus(c(p["Beta"]) * x)
    if name == "ACTIVATION_SOFTSIGN":
        return tf.math.softsign(x)
    if name == "ACTIVATION_SHRINK":
        b, t = c(p["Bias"]), c(p["Threshold"])
        return tf.where(x > t, x - b, tf.where(x < -t, x + b, tf.zeros_like(x)))
    if name == "ACTIVATION_CELU":
        a = c(p["Alpha"])
        return tf.maximum(c(0.0), x) + tf.minimum(c(0.0), a * tf.math.expm1(x / a))
    if name == "ACTIVATION_GELU":
        return tf.nn.gelu(x, approximate=False)
    raise dc.Unsupported(f"{name}: no TensorFlow lowering")


def axis_groups(plan):
    """The input's axes of size above 1, adjacent ones merged where they are alike (all reduced
    or all kept, each operand broadcast along all or none of them; a windowed axis alone), so
    that a desc of high rank reaches TensorFlow at rank 5 or less."""
    members = [m for m in plan.inputs if m != plan.input]
    windowed = plan.kernel.startswith("local_response")

    def pattern(i):
        alone = i if windowed and i in plan.axes else -1
        return (i in plan.axes, alone, tuple(plan.aligned_sizes(m)[i] == 1 for m in members))

    groups = []
    for i, size in enumerate(plan.shape):
        if size == 1:
            continue
        if groups and pattern(groups[-1][-1]) == pattern(i):
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


class _Merged:
    """The plan seen through :func:`axis_groups`: ``shape`` and ``axes`` of the merged axes."""

    def __init__(self, plan, groups):
        self._plan = plan
        self.groups = groups
        self.shape = tuple(int(np.prod([plan.shape[i] for i in g])) for g in groups)
        self.axes = tuple(k for k, g in enumerate(groups) if g[0] in plan.axes)

    def __getattr__(self, name):
        return getattr(self._plan, name)


class TfBackend:
    name = "tensorflow"
    feature_level = "6_4"

    def __init__(self, float16="float32"):
        self.native16 = float16 == "native"

    def versions(self):
        return {"tensorflow": tf.__version__}

    def supports(self, desc):
        p = dc.plan(desc)
        types = {p.dtype(m) for m in (*p.inputs, *p.outputs)}
        if not types <= {np.dtype(np.float32), np.dtype(np.float16)}:
            return f"data types {sorted(types)}"
        if len(p.shape) > 5 and len(axis_groups(p)) > 5:
            return "TensorFlow's CPU kernels broadcast up to rank 5 ('Broadcast ... is not supported yet')"
        return True

    # ------------------------------------------------------------------ helpers
    def _ctype(self, p):
        return tf.float16 if (self.native16 and p.dtype(p.input) == np.float16) else F32

    def _get(self, p, inputs, member, ct):
        """A member right-aligned to the input's rank (broadcastable), as a tensor."""
        if member is None:
            return None
        v = np.asarray(inputs[member]).reshape(p.aligned_sizes(member))
        if self._groups is not None:  # merged axes (TF broadcasts up to rank 5)
            v = v.reshape([int(np.prod([v.shape[i] for i in g])) for g in self._groups])
        return tf.constant(v, ct)

    def _affine(self, p, inputs, ct, y):
        """y * Scale + Bias, then :meth:`_after_affine`."""
        scale, bias = self._get(p, inputs, p.scale, ct), self._get(p, inputs, p.bias, ct)
        y = y if scale is None else y * scale
        y = y if bias is None else y + bias
        return self._after_affine(p, inputs, ct, y)

    def _after_affine(self, p, inputs, ct, y):
        """+ FusedAdd, then the fused activation."""
        if p.fused_add:
            y = y + self._get(p, inputs, p.fused_add, ct)
        return _act(p.activation, y, p.activation_params) if p.activation else y

    def _finish(self, p, values):
        return p.finish({k: (v.numpy() if hasattr(v, "numpy") else v) for k, v in values.items()})

    # ------------------------------------------------------------------ execute
    _groups = None

    def execute(self, desc, inputs):
        p = dc.plan(desc)
        self._groups = None
        if len(p.shape) > 5:
            self._groups = axis_groups(p)
            p = _Merged(p, self._groups)
        return getattr(self, "_" + p.kernel)(p, inputs)

    def _normalization(self, p, inputs):
        ct = self._ctype(p)
        x = self._get(p, inputs, p.input, ct)
        axes = list(p.axes)
        mean, var = tf.nn.moments(x, axes=axes, keepdims=True)
        if p.normalize_variance:  # Scale and Bias folded in: x * inv + (Bias - mean * inv)
            scale, bias = self._get(p, inputs, p.scale, ct), self._get(p, inputs, p.bias, ct)
            y = tf.nn.batch_normalization(x, mean, var, bias, scale, float(p.epsilon))
            y = self._after_affine(p, inputs, ct, y)
        else:
            y = self._affine(p, inputs, ct, x - mean)
        out = {p.output: y}
        if p.mean_output:
            out[p.mean_output] = mean
        if p.variance_output:
            out[p.variance_output] = var
        return self._finish(p, out)

    def _rms_normalization(self, p, inputs):
        ct = self._ctype(p)
        x = self._get(p, inputs, p.input, ct)
        y = x
        if p.normalize_variance:
            ms = tf.reduce_mean(tf.square(x), axis=list(p.axes), keepdims=True)
            y = x * tf.math.rsqrt(ms + tf.constant(p.epsilon, ct))
        return self._finish(p, {p.output: self._affine(p, inputs, ct, y)})

    def _given_statistics(self, p, inputs):
        ct = self._ctype(p)
        g = lambda m: self._get(p, inputs, m, ct)  # noqa: E731
        y = tf.nn.batch_normalization(
            g(p.input), g(p.mean), g(p.variance), g(p.bias), g(p.scale), float(p.epsilon)
        )
        if p.activation:
            y = _act(p.activation, y, p.activation_params)
        return self._finish(p, {p.output: y})

    def _normalization_grad(self, p, inputs):
        ct = self._ctype(p)
        g = lambda m: self._get(p, inputs, m, ct)  # noqa: E731
        x, dy, mean, var, scale = g(p.input), g(p.input_gradient), g(p.mean), g(p.variance), g(p.scale)
        axes = list(p.axes)
        eps = tf.constant(p.epsilon, ct)
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(x)
            tape.watch(scale)
            if p.statistics == "batch":
                live_mean = tf.reduce_mean(x, axis=axes, keepdims=True)
                m = mean + (live_mean - tf.stop_gradient(live_mean))
                # the variance's derivative about the Mean member (DirectML centres on it)
                live_var = tf.reduce_mean(tf.square(x - mean), axis=axes, keepdims=True)
                v = var + (live_var - tf.stop_gradient(live_var))
            else:
                m, v = mean, var
            y = (x - m) * tf.math.rsqrt(v + eps) * scale
        dx = tape.gradient(y, x, output_gradients=dy)
        dscale = tf.reduce_sum(dy * (x - mean), axis=axes, keepdims=True) * tf.math.rsqrt(var + eps)
        dbias = tf.reduce_sum(dy, axis=axes, keepdims=True)
        return self._finish(p, {p.output: dx, p.scale_gradient_output: dscale, p.bias_gradient_output: dbias})

    def _lrn_forward(self, p, x):
        """TF's own LRN kernel for odd cross-channel windows on 4-D input; a composed sum of
        squares otherwise."""
        alpha = float(np.float32(p.alpha) / np.float32(p.divisor))
        if (
            p.cross_channel
            and list(p.axes) == [1]
            and p.below == p.above
            and len(p.shape) == 4
            and p.shape[1] <= 4096
        ):
            nhwc = tf.transpose(x, [0, 2, 3, 1])
            y = tf.nn.local_response_normalization(
                nhwc, depth_radius=int(p.below), bias=float(p.bias), alpha=alpha, beta=float(p.beta)
            )
            return tf.transpose(y, [0, 3, 1, 2])
        sq = tf.square(x)
        for axis in p.axes:  # the window's sum along each axis: a convolution with ones
            moved = tf.experimental.numpy.moveaxis(sq, axis, -1)
            shape = tf.shape(moved)
            rows = tf.reshape(moved, [-1, 1, moved.shape[-1], 1])
            ones = tf.ones([1, p.below + p.above + 1, 1, 1], x.dtype)
            summed = tf.nn.conv2d(rows, ones, strides=1, padding=[[0, 0], [0, 0], [p.below, p.above], [0, 0]])
            sq = tf.experimental.numpy.moveaxis(tf.reshape(summed, shape), -1, axis)
        d = tf.constant(p.bias, x.dtype) + tf.constant(alpha, x.dtype) * sq
        return x * tf.pow(d, tf.constant(-p.beta, x.dtype))

    def _local_response(self, p, inputs):
        x = self._get(p, inputs, p.input, self._ctype(p))
        return self._finish(p, {p.output: self._lrn_forward(p, x)})

    def _local_response_grad(self, p, inputs):
        ct = self._ctype(p)
        x, dy = self._get(p, inputs, p.input, ct), self._get(p, inputs, p.input_gradient, ct)
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = self._lrn_forward(p, x)
        return self._finish(p, {p.output: tape.gradient(y, x, output_gradients=dy)})

    def _lp_normalization(self, p, inputs):
        ct = self._ctype(p)
        x = self._get(p, inputs, p.input, ct)
        axes = list(p.axes)
        if p.p == 2 and p.epsilon == 0.0:
            y = tf.math.l2_normalize(x, axis=axes, epsilon=0.0)
        elif p.p == 2:
            y = x * tf.math.rsqrt(
                tf.reduce_sum(tf.square(x), axis=axes, keepdims=True) + tf.constant(p.epsilon, ct)
            )
        else:
            l1 = tf.reduce_sum(tf.abs(x), axis=axes, keepdims=True)
            y = x / tf.sqrt(tf.square(l1) + tf.constant(p.epsilon, ct))
        return self._finish(p, {p.output: y})
