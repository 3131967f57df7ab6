//! Cutting the ranked memories to a token budget, with a dynamic k.

use super::memory::RecalledMemory;
use hindsight_text::terms;

/// Tokens a brief line costs besides its content (bullet, date, confidence).
const LINE_OVERHEAD_TOKENS: usize = 12;
/// Without an explicit `top_k`, memories scoring under this share of the best
/// are left out: they would spend the budget on noise.
pub const RELATIVE_CUTOFF: f64 = 0.5;
/// The most memories one answer holds.
pub const MAX_K: usize = 50;

/// A rough token count (about four characters per token in English; one per
/// character in Chinese, which the character count already over-covers).
pub fn estimate_tokens(text: &str) -> usize {
    let chars = text.chars().count();
    let cjk = text.chars().filter(|c| terms::is_cjk(*c)).count();
    (chars - cjk).div_ceil(4) + cjk
}

/// What a memory costs an answer: its content, its context and a line.
pub fn memory_tokens(m: &RecalledMemory) -> usize {
    estimate_tokens(&m.content) + m.context.as_deref().map_or(0, estimate_tokens)
}

/// Keeps the best memories (already sorted, best first) that fit `max_tokens`:
/// at most `top_k` when given, else as many as score within
/// [`RELATIVE_CUTOFF`] of the best (never more than [`MAX_K`]). Stops at the
/// first memory that does not fit, so the order of the ranking is kept.
pub fn cut(
    ranked: Vec<RecalledMemory>,
    top_k: Option<usize>,
    max_tokens: usize,
) -> Vec<RecalledMemory> {
    let k = top_k.unwrap_or(MAX_K).min(MAX_K);
    let floor = match (top_k, ranked.first()) {
        (None, Some(best)) => best.score * RELATIVE_CUTOFF,
        _ => f64::MIN,
    };
    let mut spent = 0;
    let mut out = Vec::new();
    for m in ranked {
        if out.len() >= k || m.score < floor {
            break;
        }
        let cost = memory_tokens(&m) + LINE_OVERHEAD_TOKENS;
        if spent + cost > max_tokens {
            break;
        }
        spent += cost;
        out.push(m);
    }
    out
}

#[cfg(test)]
mod tests {

    use super::*;

    fn memory(content: &str, score: f64) -> RecalledMemory {
        RecalledMemory {
            score,
            ..crate::rank::memory::sample(content)
        }
    }

    #[test]
    fn tokens_are_estimated_per_script() {
        assert_eq!(estimate_tokens("abcdefgh"), 2);
        assert_eq!(estimate_tokens("北京"), 2);
        assert_eq!(estimate_tokens(""), 0);
    }

    #[test]
    fn the_budget_and_top_k_bound_the_answer_in_rank_order() {
        let ranked: Vec<_> = (0..10)
            .map(|i| memory(&"x".repeat(40), 1.0 - i as f64 * 0.01))
            .collect();
        // Each costs 10 + 12 tokens.
        assert_eq!(cut(ranked.clone(), Some(3), 2_000).len(), 3);
        assert_eq!(cut(ranked.clone(), None, 66).len(), 3);
        assert!(cut(ranked.clone(), Some(5), 0).is_empty());
        let kept = cut(ranked.clone(), Some(10), 2_000);
        assert_eq!(
            kept.iter().map(|m| m.id).collect::<Vec<_>>(),
            ranked.iter().map(|m| m.id).collect::<Vec<_>>()
        );
    }

    #[test]
    fn without_top_k_weak_memories_are_left_out() {
        let ranked = vec![memory("a", 0.9), memory("b", 0.5), memory("c", 0.3)];
        assert_eq!(cut(ranked.clone(), None, 2_000).len(), 2);
        assert_eq!(
            cut(ranked, Some(3), 2_000).len(),
            3,
            "an explicit k is honoured"
        );
    }
}
