//! A dense layer (candle-nn's `Linear`) that multiplies a few rows itself.
//!
//! A recall's query is a dozen tokens. candle hands every product to gemm,
//! which first packs the whole weight matrix into its own layout, then
//! multiplies: for a dozen rows the packing was most of the query's time
//! (55 % of it under `perf`), and it is repeated for every query, since the
//! weights are the right-hand side. Here the weights are read once, in the
//! layout they are stored in (one contiguous row per output), four outputs
//! against two input rows at a time in SIMD registers. Batches of many rows
//! (the embed stage's facts) still go to gemm, where packing pays for itself.

use candle_core::{DType, Layout, Module, Result, Storage, Tensor};
use candle_nn::Linear;
use pulp::{Arch, Simd, WithSimd};

/// Products of at most this many rows (batch × tokens) are done here. A
/// query of up to 32 tokens keeps its rows and four weight rows in the
/// first two levels of cache; longer texts and batches go to gemm.
const FEW_ROWS: usize = 32;

/// `Linear`, with products of few rows done by [`FewRows`].
pub struct Dense {
    linear: Linear,
}

impl Dense {
    pub fn new(linear: Linear) -> Self {
        Self { linear }
    }
}

impl Module for Dense {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let dims = x.dims();
        let Some((&inner, lead)) = dims.split_last() else {
            return self.linear.forward(x);
        };
        let rows: usize = lead.iter().product();
        let weight = self.linear.weight();
        let few = rows > 0
            && rows <= FEW_ROWS
            && x.device().is_cpu()
            && x.dtype() == DType::F32
            && weight.dtype() == DType::F32
            && weight.dims2().is_ok_and(|(_, k)| k == inner);
        if !few {
            // Many rows, or something gemm's path reports better (a shape
            // that does not fit, another dtype or device).
            return self.linear.forward(x);
        }
        let x = x.contiguous()?;
        let (outputs, k) = weight.dims2()?;
        let mut out = vec![0f32; rows * outputs];
        {
            let (x_storage, x_layout) = x.storage_and_layout();
            let (w_storage, w_layout) = weight.storage_and_layout();
            let op = FewRows {
                x: f32_slice(&x_storage, x_layout)?,
                w: f32_slice(&w_storage, w_layout)?,
                k,
                out: &mut out,
            };
            run(op);
        }
        if let Some(bias) = self.linear.bias() {
            let (b_storage, b_layout) = bias.storage_and_layout();
            let bias = f32_slice(&b_storage, b_layout)?;
            for row in out.chunks_exact_mut(outputs) {
                row.iter_mut().zip(bias).for_each(|(o, b)| *o += b);
            }
        }
        let mut shape = lead.to_vec();
        shape.push(outputs);
        Tensor::from_vec(out, shape, x.device())
    }
}

/// The f32 values a contiguous CPU tensor holds.
fn f32_slice<'a>(storage: &'a Storage, layout: &Layout) -> Result<&'a [f32]> {
    let Storage::Cpu(cpu) = storage else {
        candle_core::bail!("a dense layer's few-row product runs on the CPU only");
    };
    let Some((start, end)) = layout.contiguous_offsets() else {
        candle_core::bail!("a dense layer's few-row product needs contiguous tensors");
    };
    let all = cpu.as_slice::<f32>()?;
    all.get(start..end)
        .ok_or_else(|| candle_core::Error::Msg("tensor outside its storage".into()))
}

/// `op` with AVX2 and FMA where the CPU has them (pulp's `Arch` reaches
/// them only with a feature gemm does not enable), else what `Arch` finds.
fn run(op: FewRows) {
    #[cfg(target_arch = "x86_64")]
    if let Some(simd) = pulp::x86::V3::try_new() {
        return Simd::vectorize(simd, op);
    }
    Arch::new().dispatch(op)
}

/// `out[i][j] = x[i] · w[j]`: `x` is rows × `k`, `w` outputs × `k`, `out`
/// rows × outputs, all row-major.
struct FewRows<'a> {
    x: &'a [f32],
    w: &'a [f32],
    k: usize,
    out: &'a mut [f32],
}

impl WithSimd for FewRows<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) {
        let Self { x, w, k, out } = self;
        let rows = x.len() / k;
        let outputs = w.len() / k;
        let row = |i: usize| &x[i * k..(i + 1) * k];
        let weights = |j: usize| &w[j * k..(j + 1) * k];
        let mut j = 0;
        // Outer loop over weights: each block of four weight rows is read
        // from memory once and stays in cache while every input row meets it.
        while j < outputs {
            if j + 4 <= outputs {
                let ws = [weights(j), weights(j + 1), weights(j + 2), weights(j + 3)];
                let mut i = 0;
                while i + 2 <= rows {
                    let sums = dots(simd, [row(i), row(i + 1)], ws);
                    for (r, sums) in sums.iter().enumerate() {
                        out[(i + r) * outputs + j..][..4].copy_from_slice(sums);
                    }
                    i += 2;
                }
                if i < rows {
                    let [sums] = dots(simd, [row(i)], ws);
                    out[i * outputs + j..][..4].copy_from_slice(&sums);
                }
                j += 4;
            } else {
                for i in 0..rows {
                    let [[sum]] = dots(simd, [row(i)], [weights(j)]);
                    out[i * outputs + j] = sum;
                }
                j += 1;
            }
        }
    }
}

/// The `R × C` dot products of `xs` with `ws` (all of one length), with
/// `R × C` accumulators in registers.
#[inline(always)]
fn dots<S: Simd, const R: usize, const C: usize>(
    simd: S,
    xs: [&[f32]; R],
    ws: [&[f32]; C],
) -> [[f32; C]; R] {
    let xs = xs.map(S::as_simd_f32s);
    let ws = ws.map(S::as_simd_f32s);
    let zero = simd.splat_f32s(0.0);
    let mut acc = [[zero; C]; R];
    let lanes = xs[0].0.len();
    for l in 0..lanes {
        let wv: [S::f32s; C] = std::array::from_fn(|c| ws[c].0[l]);
        for r in 0..R {
            let xv = xs[r].0[l];
            for c in 0..C {
                acc[r][c] = simd.mul_add_e_f32s(xv, wv[c], acc[r][c]);
            }
        }
    }
    std::array::from_fn(|r| {
        std::array::from_fn(|c| {
            let tail: f32 = xs[r].1.iter().zip(ws[c].1).map(|(a, b)| a * b).sum();
            simd.reduce_sum_f32s(acc[r][c]) + tail
        })
    })
}

#[cfg(test)]
mod tests {
    use candle_core::Device;

    use super::*;

    /// Deterministic values in [-1, 1).
    fn values(n: usize, seed: u64) -> Vec<f32> {
        let mut state = seed;
        (0..n)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
            })
            .collect()
    }

    fn layer(outputs: usize, k: usize, bias: bool) -> Result<Linear> {
        let device = Device::Cpu;
        let w = Tensor::from_vec(values(outputs * k, 1), (outputs, k), &device)?;
        let b = if bias {
            Some(Tensor::from_vec(values(outputs, 2), outputs, &device)?)
        } else {
            None
        };
        Ok(Linear::new(w, b))
    }

    fn assert_close(a: &Tensor, b: &Tensor) -> Result<()> {
        assert_eq!(a.dims(), b.dims());
        let a = a.flatten_all()?.to_vec1::<f32>()?;
        let b = b.flatten_all()?.to_vec1::<f32>()?;
        for (x, y) in a.iter().zip(&b) {
            assert!((x - y).abs() <= 1e-4 * (1.0 + y.abs()), "{x} against {y}");
        }
        Ok(())
    }

    #[test]
    fn few_rows_match_gemm_whatever_the_shape() -> Result<()> {
        // Odd row counts, output counts that are no multiple of 4 and widths
        // that are no multiple of a SIMD register reach every tail.
        for (batch, tokens, outputs, k, bias) in [
            (1, 13, 384, 384, true),
            (1, 7, 1536, 384, true),
            (1, 12, 384, 1536, false),
            (2, 5, 41, 389, true),
            (1, 1, 3, 5, false),
        ] {
            let linear = layer(outputs, k, bias)?;
            let x = Tensor::from_vec(
                values(batch * tokens * k, 3),
                (batch, tokens, k),
                &Device::Cpu,
            )?;
            let ours = Dense::new(linear.clone()).forward(&x)?;
            assert_close(&ours, &linear.forward(&x)?)?;
        }
        Ok(())
    }

    #[test]
    fn many_rows_and_strided_inputs_are_gemm_s() -> Result<()> {
        let linear = layer(24, 16, true)?;
        let dense = Dense::new(linear.clone());
        let many = Tensor::from_vec(values(40 * 16, 4), (1, 40, 16), &Device::Cpu)?;
        assert_close(&dense.forward(&many)?, &linear.forward(&many)?)?;
        // A transposed view: made contiguous before the product.
        let strided =
            Tensor::from_vec(values(16 * 6, 5), (1, 16, 6), &Device::Cpu)?.transpose(1, 2)?;
        assert_close(
            &dense.forward(&strided)?,
            &linear.forward(&strided.contiguous()?)?,
        )
    }

    #[test]
    fn a_shape_that_does_not_fit_is_an_error() -> Result<()> {
        let dense = Dense::new(layer(8, 16, false)?);
        let x = Tensor::zeros((1, 3, 15), DType::F32, &Device::Cpu)?;
        assert!(dense.forward(&x).is_err());
        Ok(())
    }
}
