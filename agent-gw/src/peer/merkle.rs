//! The hash tree of a batch of forwarding assertions (RFC 9162 §2.1's
//! Merkle tree, SHA-256): a sending gateway signs one root per event-loop
//! turn and target router instead of one signature per call, and each
//! call carries its leaf's inclusion proof.
//!
//! Leaves and interior nodes are hashed with distinct prefixes (`0x00`,
//! `0x01`), so no leaf can pose as a subtree and no proof can be stretched
//! or shortened to reach the same root. Sans-IO, allocation-light: a
//! batch is at most [`MAX_BATCH`] leaves, so a proof is at most
//! [`MAX_DEPTH`] hashes.

use edkey::Sha256;

/// Most calls one signature covers (a proof of at most 8 hashes).
pub const MAX_BATCH: usize = 256;
/// Longest inclusion proof: `log2(MAX_BATCH)`.
pub const MAX_DEPTH: usize = 8;

pub type Hash = [u8; 32];

/// The leaf of one assertion's encoded claims.
pub fn leaf(bytes: &[u8]) -> Hash {
    let mut h = Sha256::new();
    h.update([0u8]);
    h.update(bytes);
    h.finalize()
}

fn node(left: &Hash, right: &Hash) -> Hash {
    let mut h = Sha256::new();
    h.update([1u8]);
    h.update(left);
    h.update(right);
    h.finalize()
}

/// The root of `leaves` (at least one) and every leaf's inclusion proof,
/// from the leaf upwards.
pub fn build(leaves: &[Hash]) -> (Hash, Vec<Vec<Hash>>) {
    let mut proofs = vec![Vec::new(); leaves.len()];
    let root = subtree(leaves, &mut proofs);
    (root, proofs)
}

fn subtree(leaves: &[Hash], proofs: &mut [Vec<Hash>]) -> Hash {
    match leaves.len() {
        0 => [0; 32],
        1 => leaves[0],
        n => {
            // The largest power of two below n goes left (RFC 9162).
            let k = 1usize << (usize::BITS - 1 - (n - 1).leading_zeros());
            let (lp, rp) = proofs.split_at_mut(k);
            let left = subtree(&leaves[..k], lp);
            let right = subtree(&leaves[k..], rp);
            lp.iter_mut().for_each(|p| p.push(right));
            rp.iter_mut().for_each(|p| p.push(left));
            node(&left, &right)
        }
    }
}

/// The root that leaf `index` of a tree of `size` leaves leads to with
/// `path`, or `None` when the proof cannot belong to such a tree (wrong
/// length for that position, index outside the tree).
pub fn root_of(leaf: Hash, index: u32, size: u32, path: &[Hash]) -> Option<Hash> {
    if index >= size || size as usize > MAX_BATCH || path.len() > MAX_DEPTH {
        return None;
    }
    // RFC 9162 §2.1.3.2.
    let (mut f, mut s) = (index, size - 1);
    let mut r = leaf;
    for p in path {
        if s == 0 {
            return None;
        }
        if f & 1 == 1 || f == s {
            r = node(p, &r);
            while f & 1 == 0 && f != 0 {
                f >>= 1;
                s >>= 1;
            }
        } else {
            r = node(&r, p);
        }
        f >>= 1;
        s >>= 1;
    }
    (s == 0).then_some(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaves(n: usize) -> Vec<Hash> {
        (0..n).map(|i| leaf(&i.to_le_bytes())).collect()
    }

    #[test]
    fn every_leaf_of_every_size_proves_the_root_and_nothing_else() {
        for n in 1..=33usize {
            let ls = leaves(n);
            let (root, proofs) = build(&ls);
            for (i, p) in proofs.iter().enumerate() {
                let (i32_, n32) = (i as u32, n as u32);
                assert_eq!(root_of(ls[i], i32_, n32, p), Some(root), "n={n} i={i}");
                // Another leaf or another position: not this root (the size is
                // bound by the signature over the root, see `assertion`).
                let other = leaf(b"other");
                assert_ne!(root_of(other, i32_, n32, p), Some(root));
                if n > 1 {
                    assert_ne!(root_of(ls[i], (i32_ + 1) % n32, n32, p), Some(root));
                }
                // One hash short or one too many never verifies.
                if !p.is_empty() {
                    assert_ne!(root_of(ls[i], i32_, n32, &p[1..]), Some(root));
                }
                let mut longer = p.clone();
                longer.push(root);
                assert_ne!(root_of(ls[i], i32_, n32, &longer), Some(root));
            }
        }
    }

    #[test]
    fn a_batch_of_one_is_its_leaf_and_the_tree_matches_rfc9162() {
        let ls = leaves(3);
        assert_eq!(build(&ls[..1]).0, ls[0]);
        assert_eq!(build(&ls[..1]).1, vec![Vec::<Hash>::new()]);
        // MTH(d0..d2) = node(node(d0, d1), d2).
        assert_eq!(build(&ls).0, node(&node(&ls[0], &ls[1]), &ls[2]));
        assert_ne!(
            leaf(b""),
            node(&[0; 32], &[0; 32]),
            "leaves and nodes differ"
        );
    }

    #[test]
    fn proofs_are_bounded() {
        let ls = leaves(MAX_BATCH);
        let (root, proofs) = build(&ls);
        assert!(proofs.iter().all(|p| p.len() == MAX_DEPTH));
        assert_eq!(root_of(ls[7], 7, MAX_BATCH as u32, &proofs[7]), Some(root));
        assert_eq!(root_of(ls[7], 7, MAX_BATCH as u32 + 1, &proofs[7]), None);
        assert_eq!(root_of(ls[0], 3, 3, &[]), None, "index outside the tree");
    }
}
