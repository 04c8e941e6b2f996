"""The words of autograd the flow analysis reads code with: calls that start no graph or cut it, methods only a
module has, bases that make a class a module, and the naming conventions (analysis/model/conventions.py asks
them) for models, losses, optimizers and stop-gradient values."""
from __future__ import annotations

import re


NO_GRAD_CONTEXTS = frozenset({"torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad", "torch.autograd.grad_mode.no_grad"})
SET_GRAD_ENABLED = frozenset({"torch.set_grad_enabled", "torch.autograd.set_grad_enabled"})
# Methods whose result has no autograd history.
DETACHING_METHODS = frozenset({"detach", "item", "tolist", "numpy"})
NON_DIFFERENTIABLE_METHODS = frozenset(
    {
        "argmax", "argmin", "argsort", "long", "int", "bool", "byte", "short", "size", "dim", "numel",
        "eq", "ne", "gt", "lt", "ge", "le", "isnan", "isinf", "isfinite", "nonzero", "count_nonzero",
        "detach_", "zero_", "zeros_like", "new_zeros", "new_ones", "new_empty",
        "new_tensor", "new_full", "get_device", "is_contiguous", "data_ptr",
    }
)
NON_DIFFERENTIABLE_ATTRIBUTES = frozenset(
    {"shape", "device", "dtype", "grad", "requires_grad", "is_leaf", "ndim", "grad_fn", "is_cuda", "layout"}
)
NON_DIFFERENTIABLE_FUNCTIONS = frozenset(
    {
        "torch.argmax", "torch.argmin", "torch.argsort", "torch.zeros_like", "torch.ones_like", "torch.empty_like",
        "torch.full_like", "torch.rand_like", "torch.randn_like", "torch.randint_like", "torch.is_tensor",
        "torch.numel", "torch.eq", "torch.ne", "torch.gt", "torch.lt", "torch.ge", "torch.le", "torch.isnan",
        "torch.isinf", "torch.isfinite", "torch.nonzero", "torch.count_nonzero", "torch.from_numpy",
        "torch.as_tensor", "torch.no_grad", "torch.inference_mode", "torch.bucketize", "torch.searchsorted",
    }
)
AUTOGRAD_GRAD = frozenset({"torch.autograd.grad", "torch.autograd.functional.grad"})
BACKWARD_METHODS = frozenset({"backward", "manual_backward"})
# Calls that copy data into a new leaf tensor: the graph ends there.
REWRAP_FUNCTIONS = frozenset(
    {"torch.tensor", "torch.autograd.Variable", "torch.autograd.variable.Variable", "torch.Tensor", "torch.FloatTensor"}
)
# Python builtins whose result holds (some of) their arguments' tensors: ``sum(losses)``, ``max(a, b)``.
VALUE_PASSING_BUILTINS = frozenset({"sum", "min", "max", "abs", "sorted", "reversed", "list", "tuple", "next", "iter"})
# Calls that hand data across NumPy (``torch.from_numpy(np.clip(a, 0, 1))``): no history, but the
# values are those of their arguments, which is what a graph cut before them cost.
ARRAY_PASSING_FUNCTIONS = frozenset({"torch.from_numpy", "torch.as_tensor"})
ARRAY_LIBRARIES = ("numpy.", "math.", "scipy.")
# ``through`` of the carries questions: 0 the graph as it is, 1 through detaching steps, 2 also across
# NumPy, on the way back into torch.
ACROSS_ARRAYS = 2
# Methods only a module has: a name or attribute they are called on holds a module.
MODULE_ONLY_METHODS = frozenset(
    {
        "parameters", "named_parameters", "buffers", "named_buffers", "modules", "named_modules", "children",
        "named_children", "forward", "register_forward_hook", "register_forward_pre_hook", "register_full_backward_hook",
    }
)
# Methods of a module that do not run it on tensors (``D.parameters()``, ``model.generate(...)``
# runs without gradients).
NON_FORWARD_MODULE_METHODS = MODULE_ONLY_METHODS - {"forward"} | {
    "train", "eval", "zero_grad", "state_dict", "load_state_dict", "to", "cuda", "cpu", "half", "float", "double",
    "bfloat16", "type", "requires_grad_", "apply", "add_module", "register_buffer", "register_parameter",
    "register_module", "get_submodule", "get_parameter", "get_buffer", "generate", "save_pretrained", "extra_repr",
    "share_memory", "to_empty",
}
# What a module class inherits and calls on ``self`` other than submodules: nn.Module's own methods,
# LightningModule's (``self.log``, ``self.manual_backward``) and PreTrainedModel's.
NON_MODULE_SELF_ATTRIBUTES = NON_FORWARD_MODULE_METHODS | {
    "log", "log_dict", "print", "optimizers", "lr_schedulers", "manual_backward", "toggle_optimizer",
    "untoggle_optimizer", "clip_gradients", "all_gather", "save_hyperparameters", "freeze", "unfreeze", "backward",
    "post_init", "init_weights", "tie_weights", "get_input_embeddings", "get_output_embeddings",
    "set_input_embeddings", "resize_token_embeddings", "get_extended_attention_mask", "invert_attention_mask",
    "get_head_mask", "gradient_checkpointing_enable", "prepare_inputs_for_generation", "warn_if_padding_and_no_attention_mask",
    "loss_function", "can_generate", "num_parameters", "get_position_embeddings", "float_tensor",
}
# Bases that make a class an ``nn.Module`` without being in ``torch.nn``.
MODULE_BASES = frozenset(
    {
        "pytorch_lightning.LightningModule", "pytorch_lightning.core.LightningModule",
        "pytorch_lightning.core.module.LightningModule", "lightning.LightningModule",
        "lightning.pytorch.LightningModule", "lightning.pytorch.core.LightningModule",
        "transformers.PreTrainedModel", "transformers.modeling_utils.PreTrainedModel",
    }
)
REDUCTION_METHODS = frozenset({"sum", "mean", "prod", "norm", "std", "var", "max", "min", "amax", "amin", "nansum", "nanmean", "median"})
FLAT_ONE_METHODS = frozenset({"flatten", "ravel"})
NOT_MODULE_CLASSES = frozenset(
    {"torch.nn.Parameter", "torch.nn.parameter.Parameter", "torch.nn.ParameterList", "torch.nn.ParameterDict", "torch.nn.Buffer"}
)
PARAMETER_CLASSES = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})
# Functions whose return value a framework back-propagates (nn.Module, Lightning, the Hugging Face Trainer).
TRAINED_BY_FRAMEWORK = frozenset({"forward", "training_step", "compute_loss"})

# A callee named like a network: model, self.encoder, student_net, netG, self.fc, self.head2.
MODEL_NAME = re.compile(
    r"^(?:[a-z0-9]+_)*(?:model|net|network|encoder|decoder|backbone|classifier|generator|discriminator|"
    r"critic|actor|policy|student|regressor|rnn|lstm|gru|transformer|unet|vae|autoencoder|gen|disc)$|^net[A-Z]\w*$"
    r"|^(?:fc|head|proj|mlp|linear|conv)\d*$|^[GD](?:_?[A-Z0-9]\w*)?$"
)
LOSS_NAME = re.compile(r"(?:^|_)(?:loss|losses|criterion|criterions|loss_fn|loss_func|objective)(?:$|_)|^criterion|loss$", re.I)
# Values named this way are meant to stop gradients (teacher outputs, EMA, targets).
STOP_GRADIENT_NAME = re.compile(r"target|teacher|ema|momentum|(?:^|_)sg(?:$|_)|frozen|stop_grad", re.I)
# Attributes of a model output that hold tensors (ModelOutput fields, tensor views).
TENSOR_FIELD = re.compile(
    r"logit|hidden|embed|loss|out|feat|score|pred|prob|state|sample|attn|attention|encoding|latent|"
    r"pool|mean|var|^T$|^mT$|^H$|^real$|^imag$|^weight$|^bias$",
    re.I,
)
OPTIMIZER_NAME = re.compile(r"opt", re.I)
# Objects whose ``backward(loss)`` back-propagates its argument (Accelerate, Fabric, DeepSpeed engines,
# fairseq's optimizer wrappers).
BACKWARD_RUNNER = re.compile(r"accelerat|fabric|engine|trainer|strategy|runner|booster|optim|^opt", re.I)
SCHEDULER_NAME = re.compile(r"sched", re.I)
SCALER_NAME = re.compile(r"scaler", re.I)
DEBUG_WORD = re.compile(r"debug|anomal|detect|check|verbose|verify|trace|nan", re.I)
TEST_PATH = re.compile(r"(?:^|[\\/])(?:tests?|testing)[\\/]|(?:^|[\\/])(?:test_[^\\/]*|[^\\/]*_test|conftest)\.py$")


