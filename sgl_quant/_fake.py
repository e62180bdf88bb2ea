"""Fake (meta) implementations so that the ops trace under torch.compile.

The ops only write into their preallocated outputs (declared mutable in the schema), so the
fake implementations have nothing to compute or return.

They do check one thing: that every tensor is on input's device. The dispatcher sends a call to the
fake implementation as soon as one argument is a meta tensor, so a call mixing real and meta tensors
(say, a weight left on the meta device by a model that was never loaded) would otherwise return
with its real outputs unwritten; the C++ checks never see it. The message is the C++ one.
"""
import torch


def _check_same_device(op, input, **tensors):
    for name, t in tensors.items():
        if t is not None and t.device != input.device:
            raise RuntimeError(f"sgl_quant.{op}: {name} must be on the same device as input ({input.device}), "
                               f"got {t.device}")


@torch.library.register_fake("sgl_quant::per_token_group_quant_8bit_v2")
def _per_token_group_quant_8bit_v2_fake(input, output_q, output_s, group_size, eps, min_8bit, max_8bit,
                                        scale_ue8m0, fuse_silu_and_mul, masked_m, enable_pdl=False):
    _check_same_device("per_token_group_quant_8bit_v2", input, output_q=output_q, output_s=output_s,
                       masked_m=masked_m)


@torch.library.register_fake("sgl_quant::per_token_group_quant_8bit_packed")
def _per_token_group_quant_8bit_packed_fake(input, output_q, output_s, group_size, eps, min_8bit, max_8bit,
                                            enable_pdl=False):
    _check_same_device("per_token_group_quant_8bit_packed", input, output_q=output_q, output_s=output_s)


@torch.library.register_fake("sgl_quant::per_token_group_quant_fp8_dsv4")
def _per_token_group_quant_fp8_dsv4_fake(input, output_q, output_s, enable_pdl=False):
    _check_same_device("per_token_group_quant_fp8_dsv4", input, output_q=output_q, output_s=output_s)


@torch.library.register_fake("sgl_quant::rmsnorm_per_token_group_quant_8bit")
def _rmsnorm_per_token_group_quant_8bit_fake(input, weight, residual, output_q, output_s, output_normed, group_size,
                                             norm_eps, eps, min_8bit, max_8bit, scale_ue8m0, enable_pdl=False):
    _check_same_device("rmsnorm_per_token_group_quant_8bit", input, weight=weight, residual=residual,
                       output_q=output_q, output_s=output_s, output_normed=output_normed)


@torch.library.register_fake("sgl_quant::per_token_quant_8bit")
def _per_token_quant_8bit_fake(input, output_q, output_s, output_azp, scale_ub, eps, fuse_silu_and_mul,
                               enable_pdl=False):
    _check_same_device("per_token_quant_8bit", input, output_q=output_q, output_s=output_s, output_azp=output_azp,
                       scale_ub=scale_ub)


@torch.library.register_fake("sgl_quant::per_tensor_quant_8bit")
def _per_tensor_quant_8bit_fake(input, output_q, output_s, is_static, eps, fuse_silu_and_mul, enable_pdl=False):
    _check_same_device("per_tensor_quant_8bit", input, output_q=output_q, output_s=output_s)


@torch.library.register_fake("sgl_quant::rmsnorm_per_token_quant_8bit")
def _rmsnorm_per_token_quant_8bit_fake(input, weight, residual, output_q, output_s, output_normed, scale_ub, norm_eps,
                                       eps, enable_pdl=False):
    _check_same_device("rmsnorm_per_token_quant_8bit", input, weight=weight, residual=residual, output_q=output_q,
                       output_s=output_s, output_normed=output_normed, scale_ub=scale_ub)


@torch.library.register_fake("sgl_quant::rmsnorm_per_tensor_quant_8bit")
def _rmsnorm_per_tensor_quant_8bit_fake(input, weight, residual, output_q, scale, output_normed, norm_eps,
                                        enable_pdl=False):
    _check_same_device("rmsnorm_per_tensor_quant_8bit", input, weight=weight, residual=residual, output_q=output_q,
                       scale=scale, output_normed=output_normed)
