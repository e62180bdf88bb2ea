"""Fake (meta) implementations so that the ops trace under torch.compile.

The ops only write into their preallocated outputs (declared mutable in the schema), so the
fake implementations have nothing to compute or return.
"""
import torch


@torch.library.register_fake("sgl_quant::per_token_group_quant_8bit_v2")
def _per_token_group_quant_8bit_v2_fake(input, output_q, output_s, group_size, eps, min_8bit, max_8bit,
                                        scale_ue8m0, fuse_silu_and_mul, masked_m, enable_pdl=False):
    return None


@torch.library.register_fake("sgl_quant::per_token_group_quant_fp8_dsv4")
def _per_token_group_quant_fp8_dsv4_fake(input, output_q, output_s, enable_pdl=False):
    return None


@torch.library.register_fake("sgl_quant::rmsnorm_per_token_group_quant_8bit")
def _rmsnorm_per_token_group_quant_8bit_fake(input, weight, residual, output_q, output_s, output_normed, group_size,
                                             norm_eps, eps, min_8bit, max_8bit, scale_ue8m0, enable_pdl=False):
    return None
