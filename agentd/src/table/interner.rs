//! Reference-counted string symbols for the few strings selection compares
//! on every candidate (tenant, next-hop router). Comparing two `u32`s in a
//! route's hot record saves a pointer chase per candidate; the counts let
//! names vanish when their last route leaves, so churn cannot grow it.
//! A symbol's text is the first route's own string (a shared
//! [`Text`]), and the table hands it to every later route of that name,
//! so thousands of routes of one tenant hold its name once.

use std::hash::BuildHasher;

use hashbrown::{DefaultHashBuilder, HashTable};

use crate::route::Text;

/// No string (a route without a next hop).
pub(crate) const NONE: u32 = u32::MAX;
/// A query-side string that no route carries.
pub(crate) const UNKNOWN: u32 = u32::MAX - 1;

#[derive(Debug)]
struct Entry {
    text: Text,
    refs: u32,
}

#[derive(Debug, Default)]
pub(crate) struct Interner {
    map: HashTable<u32>,
    entries: Vec<Option<Entry>>,
    free: Vec<u32>,
}

impl Interner {
    fn text(entries: &[Option<Entry>], sym: u32) -> &str {
        entries
            .get(sym as usize)
            .and_then(|e| e.as_ref())
            .map_or("", |e| &e.text)
    }

    /// The symbol of `s`, or `UNKNOWN` if no route carries it.
    /// The text of a live symbol.
    pub fn text_of(&self, sym: u32) -> Option<&str> {
        self.entries
            .get(sym as usize)
            .and_then(|e| e.as_ref())
            .map(|e| e.text.as_str())
    }

    /// The shared text of a live symbol.
    pub fn shared(&self, sym: u32) -> Option<&Text> {
        self.entries
            .get(sym as usize)
            .and_then(|e| e.as_ref())
            .map(|e| &e.text)
    }

    pub fn lookup(&self, hasher: &DefaultHashBuilder, s: &str) -> u32 {
        let entries = &self.entries;
        self.map
            .find(hasher.hash_one(s), |&sym| Self::text(entries, sym) == s)
            .copied()
            .unwrap_or(UNKNOWN)
    }

    pub fn acquire(&mut self, hasher: &DefaultHashBuilder, s: &Text) -> u32 {
        let hash = hasher.hash_one(s.as_str());
        let entries = &mut self.entries;
        if let Some(&sym) = self
            .map
            .find(hash, |&sym| Self::text(entries, sym) == s.as_str())
        {
            if let Some(e) = entries[sym as usize].as_mut() {
                e.refs += 1;
            }
            return sym;
        }
        let entry = Some(Entry {
            text: s.clone(),
            refs: 1,
        });
        let sym = match self.free.pop() {
            Some(sym) => {
                entries[sym as usize] = entry;
                sym
            }
            None => {
                entries.push(entry);
                (entries.len() - 1) as u32
            }
        };
        let entries = &self.entries;
        self.map
            .insert_unique(hash, sym, |&k| hasher.hash_one(Self::text(entries, k)));
        sym
    }

    pub fn acquire_opt(&mut self, hasher: &DefaultHashBuilder, s: Option<&Text>) -> u32 {
        s.map_or(NONE, |s| self.acquire(hasher, s))
    }

    pub fn release(&mut self, hasher: &DefaultHashBuilder, sym: u32) {
        let Some(Some(e)) = self.entries.get_mut(sym as usize) else {
            return;
        };
        e.refs -= 1;
        if e.refs > 0 {
            return;
        }
        let hash = hasher.hash_one(e.text.as_str());
        if let Ok(found) = self.map.find_entry(hash, |&k| k == sym) {
            found.remove();
        }
        self.entries[sym as usize] = None;
        self.free.push(sym);
    }

    pub fn allocated_bytes(&self) -> usize {
        self.map.allocation_size()
            + self.entries.capacity() * std::mem::size_of::<Option<Entry>>()
            + self
                .entries
                .iter()
                .flatten()
                .map(|e| e.text.len())
                .sum::<usize>()
            + self.free.capacity() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symbols_are_shared_counted_and_recycled() {
        let h = DefaultHashBuilder::default();
        let mut i = Interner::default();
        let lab = Text::from("lab");
        let a = i.acquire(&h, &lab);
        let again = Text::from("lab");
        assert_eq!(i.acquire(&h, &again), a);
        assert!(
            Text::ptr_eq(i.shared(a).unwrap(), &lab),
            "the first route's string is the symbol's"
        );
        let b = i.acquire(&h, &"ops".into());
        assert_ne!(a, b);
        assert_eq!(i.lookup(&h, "lab"), a);
        i.release(&h, a);
        assert_eq!(i.lookup(&h, "lab"), a);
        i.release(&h, a);
        assert_eq!(i.lookup(&h, "lab"), UNKNOWN);
        assert_eq!(i.acquire(&h, &"guest".into()), a, "freed symbol is reused");
        assert_eq!(i.lookup(&h, "ops"), b);
        assert_eq!(i.acquire_opt(&h, None), NONE);
    }
}
