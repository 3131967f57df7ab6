//! Finding the pairs of one user's memories that say the same thing (cosine
//! at or above a threshold), and grouping them.
//!
//! Up to [`EXACT_UP_TO`] memories every pair is compared. Above that, a pair
//! is only compared when the vectors agree on a band of random-hyperplane
//! signs (locality-sensitive hashing, fixed seed): with the default 16 bands
//! of 10 bits a pair at cosine 0.95 is found with probability > 0.998 (and
//! closer pairs more surely), at a cost of about n²/64 comparisons instead of
//! n²/2. Every reported pair is verified exactly.
//!
//! A comparison first looks at the leading [`HEAD`] dimensions only: the dot
//! product of the rest is at most the product of their norms
//! (Cauchy–Schwarz), so a pair whose leading part plus that bound stays under
//! the threshold cannot reach it, and the full vectors of most pairs are never
//! read (unrelated memories are nowhere near 0.95). Pairs that pass are
//! compared in full, as before: the pairs found are the same.

use std::collections::HashMap;

/// Groups up to this size are compared pair by pair.
pub const EXACT_UP_TO: usize = 4096;
const BANDS: usize = 16;
const BITS: usize = 10;

/// Cosine of two vectors (0 when either is zero).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let (mut dot, mut na, mut nb) = (0f32, 0f32, 0f32);
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na.sqrt() * nb.sqrt())
    }
}

fn normalized(v: &[f32]) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm == 0.0 {
        vec![0.0; v.len()]
    } else {
        v.iter().map(|x| x / norm).collect()
    }
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    // Eight lanes, so the compiler vectorises the loop.
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// Leading dimensions compared before the whole vectors.
const HEAD: usize = 64;
/// Room for rounding between the bound and the full dot product (both are
/// sums of a few hundred f32 products of unit vectors, off by ~1e-5 at most).
const SLACK: f32 = 1e-3;

fn dot_head(a: &[f32; HEAD], b: &[f32; HEAD]) -> f32 {
    let mut acc = [0f32; 8];
    for (x, y) in a.chunks_exact(8).zip(b.chunks_exact(8)) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    acc.iter().sum()
}

/// Unit vectors with what rules most pairs out cheaply.
struct Units {
    unit: Vec<Vec<f32>>,
    /// The first [`HEAD`] dimensions of each, zero-padded.
    heads: Vec<[f32; HEAD]>,
    /// The norm of each past its first [`HEAD`] dimensions.
    tails: Vec<f32>,
}

impl Units {
    fn new(vectors: &[&[f32]]) -> Self {
        let unit: Vec<Vec<f32>> = vectors.iter().map(|v| normalized(v)).collect();
        let heads = unit
            .iter()
            .map(|v| {
                let mut head = [0f32; HEAD];
                let n = v.len().min(HEAD);
                head[..n].copy_from_slice(&v[..n]);
                head
            })
            .collect();
        let tails = unit
            .iter()
            .map(|v| v.get(HEAD..).map_or(0.0, |t| dot(t, t).sqrt()))
            .collect();
        Self { unit, heads, tails }
    }

    /// Whether vectors `i` and `j` are at cosine ≥ `threshold`.
    fn close(&self, i: usize, j: usize, threshold: f32) -> bool {
        let (a, b) = (&self.unit[i], &self.unit[j]);
        if a.len() != b.len() {
            return false;
        }
        let bound = dot_head(&self.heads[i], &self.heads[j]) + self.tails[i] * self.tails[j];
        bound >= threshold - 1e-6 - SLACK && dot(a, b) >= threshold - 1e-6
    }
}

/// Every pair `(i, j)`, `i < j`, of `vectors` with cosine ≥ `threshold`,
/// sorted. Vectors of different lengths never pair.
pub fn near_pairs(vectors: &[&[f32]], threshold: f32) -> Vec<(usize, usize)> {
    let units = Units::new(vectors);
    let unit = &units.unit;
    let close = |i: usize, j: usize| units.close(i, j, threshold);
    let mut pairs = Vec::new();
    if unit.len() <= EXACT_UP_TO {
        for i in 0..unit.len() {
            for j in i + 1..unit.len() {
                if close(i, j) {
                    pairs.push((i, j));
                }
            }
        }
        return pairs;
    }
    let dimension = unit.first().map_or(0, Vec::len);
    let planes = hyperplanes(dimension, BANDS * BITS);
    let signatures: Vec<Vec<u16>> = unit
        .iter()
        .map(|v| {
            (0..BANDS)
                .map(|band| {
                    (0..BITS).fold(0u16, |key, bit| {
                        let plane = &planes[band * BITS + bit];
                        let side = v.len() == plane.len() && dot(v, plane) >= 0.0;
                        (key << 1) | u16::from(side)
                    })
                })
                .collect()
        })
        .collect();
    let mut seen = std::collections::HashSet::new();
    for band in 0..BANDS {
        let mut buckets: HashMap<u16, Vec<usize>> = HashMap::new();
        for (i, sig) in signatures.iter().enumerate() {
            buckets.entry(sig[band]).or_default().push(i);
        }
        for members in buckets.values() {
            for (a, &i) in members.iter().enumerate() {
                for &j in &members[a + 1..] {
                    if seen.insert((i, j)) && close(i, j) {
                        pairs.push((i, j));
                    }
                }
            }
        }
    }
    pairs.sort_unstable();
    pairs
}

/// Deterministic pseudo-random hyperplanes (xorshift, fixed seed).
fn hyperplanes(dimension: usize, count: usize) -> Vec<Vec<f32>> {
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        // Uniform in [-1, 1): enough for sign hashing.
        (state >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    };
    (0..count)
        .map(|_| (0..dimension).map(|_| next()).collect())
        .collect()
}

/// The connected groups (two or more members) that `pairs` form over `n` items,
/// each sorted, in order of their smallest member.
pub fn components(n: usize, pairs: &[(usize, usize)]) -> Vec<Vec<usize>> {
    let mut parent: Vec<usize> = (0..n).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    for &(a, b) in pairs {
        let (ra, rb) = (root(&mut parent, a), root(&mut parent, b));
        if ra != rb {
            parent[ra.max(rb)] = ra.min(rb);
        }
    }
    let mut groups: HashMap<usize, Vec<usize>> = HashMap::new();
    for i in 0..n {
        let r = root(&mut parent, i);
        groups.entry(r).or_default().push(i);
    }
    let mut out: Vec<Vec<usize>> = groups.into_values().filter(|g| g.len() > 1).collect();
    out.sort_unstable_by_key(|g| g[0]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn random_unit(seed: u64, dimension: usize) -> Vec<f32> {
        let mut s = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407)
            | 1;
        let v: Vec<f32> = (0..dimension)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
            })
            .collect();
        normalized(&v)
    }

    /// A unit vector at exactly `cos` from unit `a`.
    fn at_cosine(a: &[f32], other: &[f32], cos: f32) -> Vec<f32> {
        let d = dot(a, other);
        let ortho = normalized(
            &other
                .iter()
                .zip(a)
                .map(|(o, x)| o - d * x)
                .collect::<Vec<_>>(),
        );
        let sin = (1.0 - cos * cos).sqrt();
        a.iter()
            .zip(&ortho)
            .map(|(x, o)| cos * x + sin * o)
            .collect()
    }

    #[test]
    fn exact_pairs_at_the_threshold() {
        let a = random_unit(1, 384);
        let b = at_cosine(&a, &random_unit(2, 384), 0.951);
        let c = at_cosine(&a, &random_unit(3, 384), 0.949);
        let d = random_unit(4, 384);
        let v: Vec<&[f32]> = vec![&a, &b, &c, &d];
        assert_eq!(near_pairs(&v, 0.95), vec![(0, 1)]);
        assert!((cosine(&a, &b) - 0.951).abs() < 1e-4);
    }

    #[test]
    fn hashed_pairs_in_a_large_group() {
        let n = EXACT_UP_TO + 1000;
        let mut vectors: Vec<Vec<f32>> = (0..n as u64).map(|i| random_unit(i + 10, 384)).collect();
        // Plant 200 pairs at cosine 0.95..0.99.
        let planted: Vec<(usize, usize)> = (0..200).map(|k| (k * 7, k * 7 + 3)).collect();
        for (k, &(i, j)) in planted.iter().enumerate() {
            let cos = 0.95 + 0.04 * (k as f32 / 200.0) + 0.0005;
            vectors[j] = at_cosine(&vectors[i], &random_unit(99_000 + k as u64, 384), cos);
        }
        let refs: Vec<&[f32]> = vectors.iter().map(Vec::as_slice).collect();
        let found = near_pairs(&refs, 0.95);
        let hit = planted.iter().filter(|p| found.contains(p)).count();
        assert!(hit >= 198, "found {hit} of 200 planted pairs");
        assert!(
            found
                .iter()
                .all(|&(i, j)| cosine(&vectors[i], &vectors[j]) >= 0.95 - 1e-5)
        );
    }

    #[test]
    fn components_join_chains() {
        let groups = components(6, &[(0, 2), (2, 4), (1, 5)]);
        assert_eq!(groups, vec![vec![0, 2, 4], vec![1, 5]]);
    }
}
