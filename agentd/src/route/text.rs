//! [`Text`]: the string type of a route's fields, one pointer wide.
//!
//! A route holds half a dozen strings and both daemons keep one `Route`
//! inline per table slot (plus a growth reserve of empty slots), so the
//! 16 bytes of a `Box<str>` or `Arc<str>` per field were a third of a
//! route's inline size. `Text` keeps its length with its bytes on the
//! heap, and shares them like an `Arc<str>`: a clone of a route (FIB
//! export, a snapshot, the indexes holding route ids) allocates nothing.
//! It serializes exactly as a `str`, so no wire or disk encoding changed.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::borrow::Borrow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicU32, Ordering};

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// What precedes the bytes on the heap. `u32`s: a route string is at most
/// an endpoint URL or a contract's schema, and a frame is far smaller.
#[repr(C)]
struct Header {
    count: AtomicU32,
    len: u32,
}

/// Every empty `Text` points here and never counts references, so an
/// empty field (a route's region, most often) allocates nothing, as an
/// empty `Box<str>` did not.
static EMPTY: Header = Header {
    count: AtomicU32::new(0),
    len: 0,
};

/// An immutable, shared string one pointer wide (see the module docs).
pub struct Text(NonNull<Header>);

// SAFETY: the bytes are immutable once written and the reference count is
// atomic, as in `Arc<str>`.
unsafe impl Send for Text {}
unsafe impl Sync for Text {}

fn layout(len: usize) -> Layout {
    Layout::new::<Header>()
        .extend(Layout::array::<u8>(len).expect("string length overflows a layout"))
        .expect("string length overflows a layout")
        .0
        .pad_to_align()
}

const BYTES: usize = std::mem::size_of::<Header>();

impl Text {
    pub fn new(s: &str) -> Text {
        if s.is_empty() {
            return Text(NonNull::from(&EMPTY));
        }
        let len = u32::try_from(s.len()).expect("string longer than 4 GiB");
        let layout = layout(s.len());
        // SAFETY: `layout` is non-zero-sized; the header and `s.len()`
        // bytes after it are within the block just allocated.
        unsafe {
            let Some(p) = NonNull::new(alloc(layout).cast::<Header>()) else {
                handle_alloc_error(layout)
            };
            p.as_ptr().write(Header {
                count: AtomicU32::new(1),
                len,
            });
            std::ptr::copy_nonoverlapping(s.as_ptr(), p.as_ptr().cast::<u8>().add(BYTES), s.len());
            Text(p)
        }
    }

    fn header(&self) -> &Header {
        // SAFETY: the pointer is `EMPTY` or a live block of ours.
        unsafe { self.0.as_ref() }
    }

    pub fn as_str(&self) -> &str {
        let len = self.header().len as usize;
        // SAFETY: `len` UTF-8 bytes follow the header (none for `EMPTY`,
        // where the pointer is one past its end).
        unsafe {
            let bytes = std::slice::from_raw_parts(self.0.as_ptr().cast::<u8>().add(BYTES), len);
            std::str::from_utf8_unchecked(bytes)
        }
    }

    /// Whether both share one allocation (tests, and a quick equality).
    pub fn ptr_eq(a: &Text, b: &Text) -> bool {
        a.0 == b.0
    }
}

impl Clone for Text {
    fn clone(&self) -> Text {
        let h = self.header();
        if h.len != 0 {
            // As `Arc`: a count near overflow means leaked clones; abort
            // rather than risk a use after free.
            if h.count.fetch_add(1, Ordering::Relaxed) > u32::MAX / 2 {
                std::process::abort();
            }
        }
        Text(self.0)
    }
}

impl Drop for Text {
    fn drop(&mut self) {
        let h = self.header();
        if h.len == 0 || h.count.fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        fence(Ordering::Acquire);
        let layout = layout(h.len as usize);
        // SAFETY: the last reference to a block `new` allocated with this
        // layout.
        unsafe { dealloc(self.0.as_ptr().cast::<u8>(), layout) }
    }
}

impl Default for Text {
    fn default() -> Text {
        Text::new("")
    }
}

impl Deref for Text {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Text {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl Borrow<str> for Text {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq for Text {
    fn eq(&self, other: &Text) -> bool {
        Text::ptr_eq(self, other) || self.as_str() == other.as_str()
    }
}

impl Eq for Text {}

impl PartialEq<str> for Text {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Text {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<Text> for str {
    fn eq(&self, other: &Text) -> bool {
        self == other.as_str()
    }
}

impl PartialEq<Text> for &str {
    fn eq(&self, other: &Text) -> bool {
        *self == other.as_str()
    }
}

impl PartialEq<Text> for Box<str> {
    fn eq(&self, other: &Text) -> bool {
        **self == *other.as_str()
    }
}

impl PartialEq<Box<str>> for Text {
    fn eq(&self, other: &Box<str>) -> bool {
        *self.as_str() == **other
    }
}

impl PartialOrd for Text {
    fn partial_cmp(&self, other: &Text) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Text {
    fn cmp(&self, other: &Text) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl Hash for Text {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state)
    }
}

impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<&str> for Text {
    fn from(s: &str) -> Text {
        Text::new(s)
    }
}

impl From<&String> for Text {
    fn from(s: &String) -> Text {
        Text::new(s)
    }
}

impl From<String> for Text {
    fn from(s: String) -> Text {
        Text::new(&s)
    }
}

impl From<Box<str>> for Text {
    fn from(s: Box<str>) -> Text {
        Text::new(&s)
    }
}

impl From<&Box<str>> for Text {
    fn from(s: &Box<str>) -> Text {
        Text::new(s)
    }
}

impl From<&Text> for Box<str> {
    fn from(s: &Text) -> Box<str> {
        s.as_str().into()
    }
}

impl From<Text> for Box<str> {
    fn from(s: Text) -> Box<str> {
        s.as_str().into()
    }
}

impl From<Text> for String {
    fn from(s: Text) -> String {
        s.as_str().into()
    }
}

impl Serialize for Text {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Text {
    /// Accepts what `Box<str>` (through `String`) accepts.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Text, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Text;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Text, E> {
                Ok(Text::new(s))
            }
            fn visit_bytes<E: de::Error>(self, b: &[u8]) -> Result<Text, E> {
                match std::str::from_utf8(b) {
                    Ok(s) => Ok(Text::new(s)),
                    Err(_) => Err(E::invalid_value(de::Unexpected::Bytes(b), &self)),
                }
            }
        }
        d.deserialize_string(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_and_the_last_drop_frees() {
        let a = Text::from("agent://lab/printer");
        let b = a.clone();
        assert!(Text::ptr_eq(&a, &b));
        assert_eq!(a.header().count.load(Ordering::Relaxed), 2);
        drop(a);
        assert_eq!(b.header().count.load(Ordering::Relaxed), 1);
        assert_eq!(&*b, "agent://lab/printer");
        let t = std::thread::spawn(move || b.clone().len()).join().unwrap();
        assert_eq!(t, 19);
    }

    #[test]
    fn empty_allocates_nothing_and_equals_by_content() {
        let e = Text::default();
        assert!(Text::ptr_eq(&e, &Text::from(String::new())));
        assert_eq!(&*e.clone(), "");
        assert_eq!(Text::from("x"), Text::new("x"));
        let (a, b) = (Text::from("a"), Text::from("b"));
        assert_eq!(a.cmp(&b), std::cmp::Ordering::Less);
        assert_eq!(
            std::mem::size_of::<Option<Text>>(),
            std::mem::size_of::<usize>()
        );
    }

    #[test]
    fn encodes_as_a_boxed_str() {
        for s in ["", "demo.echo", "tab\t\"quote\" ünï"] {
            let boxed: Box<str> = s.into();
            let t = Text::from(s);
            let bytes = postcard::to_allocvec(&boxed).unwrap();
            assert_eq!(postcard::to_allocvec(&t).unwrap(), bytes);
            assert_eq!(postcard::from_bytes::<Text>(&bytes).unwrap(), t);
            let json = serde_json::to_string(&boxed).unwrap();
            assert_eq!(serde_json::to_string(&t).unwrap(), json);
            assert_eq!(serde_json::from_str::<Text>(&json).unwrap(), t);
            assert_eq!(format!("{t:?}"), format!("{boxed:?}"));
        }
    }
}
