//! The second hop's query: pseudo-relevance feedback in the embedding space
//! (Rocchio). The question's vector moves towards the first round's best
//! memories, so a second search finds memories that share their meaning (the
//! other places, people and events of a multi-part question) even when they
//! share no word with the question.

/// How far the vector moves towards the seeds' mean (1: as far as the query).
pub const FEEDBACK: f32 = 0.5;

/// The normalised `query + FEEDBACK × mean(seeds)`; `None` without seeds.
pub fn vector(query: &[f32], seeds: &[&[f32]]) -> Option<Vec<f32>> {
    if seeds.is_empty() || seeds.iter().any(|s| s.len() != query.len()) {
        return None;
    }
    let n = seeds.len() as f32;
    let mut v: Vec<f32> = query
        .iter()
        .enumerate()
        .map(|(i, q)| q + FEEDBACK * seeds.iter().map(|s| s[i]).sum::<f32>() / n)
        .collect();
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm <= f32::EPSILON {
        return None;
    }
    v.iter_mut().for_each(|x| *x /= norm);
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hindsight_core::embedding::cosine;

    #[test]
    fn the_vector_moves_towards_the_seeds_and_stays_unit_length() {
        let query = [1.0, 0.0, 0.0];
        let seed = [0.0, 1.0, 0.0];
        let moved = vector(&query, &[&seed]).expect("a vector");
        let norm: f32 = moved.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-6);
        assert!(cosine(&moved, &seed) > cosine(&query, &seed));
        assert!(
            cosine(&moved, &query) > cosine(&moved, &seed),
            "the query still weighs most"
        );
    }

    #[test]
    fn no_seeds_or_mismatched_sizes_give_no_second_hop() {
        assert_eq!(vector(&[1.0, 0.0], &[]), None);
        assert_eq!(vector(&[1.0, 0.0], &[&[1.0, 0.0, 0.0]]), None);
        assert_eq!(
            vector(&[1.0, 0.0], &[&[-2.0, 0.0]]),
            None,
            "cancels to zero"
        );
    }
}
