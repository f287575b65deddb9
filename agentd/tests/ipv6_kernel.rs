//! The per-agent addresses against the real kernel: in a network
//! namespace this test makes for itself (a thread that `unshare`s its
//! network namespace, gone when the thread ends), agentd's rtnetlink
//! code creates the dummy link (or, on a kernel without the dummy driver,
//! says so), adds and removes /128s on a link, finds them in the kernel's
//! dump, and adds and removes proxy-NDP entries on a link with
//! `proxy_ndp` turned on. The links used are the namespace's own
//! loopback (every namespace has one) so the address code runs whatever
//! drivers the kernel has. Needs root (CI and `make test` run as root);
//! elsewhere it says so and does nothing.

use std::net::Ipv6Addr;

use agentd::ipv6::kernel::{enable_proxy_ndp, index_of, Rtnl};

fn in_own_netns<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: needs root to make a network namespace");
        return None;
    }
    let t = std::thread::spawn(move || {
        // SAFETY: unshare of this thread's network namespace only; the
        // thread does nothing else and ends with the test.
        let rc = unsafe { libc::unshare(libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "unshare: {}", std::io::Error::last_os_error());
        f()
    });
    Some(t.join().expect("the namespace thread"))
}

fn a(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

#[test]
fn a_dummy_link_is_made_or_refused_and_addresses_come_and_go_and_show_in_the_dump() {
    in_own_netns(|| {
        let mut nl = Rtnl::open().unwrap();
        assert_eq!(index_of("agent0").unwrap(), None);
        match nl.ensure_dummy("agent0") {
            Ok(made) => {
                assert_eq!(index_of("agent0").unwrap(), Some(made));
                assert_eq!(
                    nl.ensure_dummy("agent0").unwrap(),
                    made,
                    "an existing link is kept"
                );
            }
            Err(e) => {
                assert_eq!(e.kind(), std::io::ErrorKind::Unsupported, "{e}");
                assert!(e.to_string().contains("kmod-dummy"), "{e}");
                assert_eq!(index_of("agent0").unwrap(), None);
            }
        }
        let lo = index_of("lo").unwrap().expect("every namespace has lo");
        let idx = nl.ensure_dummy("lo").unwrap();
        assert_eq!(idx, lo, "an existing link is used as it is");

        let (one, two) = (a("2001:db8:5::1:2:3:4"), a("2001:db8:5::a:b:c:d"));
        nl.add_addr(idx, one).unwrap();
        nl.add_addr(idx, two).unwrap();
        nl.add_addr(idx, two).unwrap(); // replacing is not an error
        let mut got: Vec<_> = nl
            .addrs(Some(idx))
            .unwrap()
            .into_iter()
            .filter(|e| e.scope == 0)
            .map(|e| (e.addr, e.prefix_len))
            .collect();
        got.sort();
        assert_eq!(got, vec![(one, 128), (two, 128)]);

        nl.del_addr(idx, one).unwrap();
        nl.del_addr(idx, one).unwrap(); // already gone: not an error
        let left: Vec<_> = nl
            .addrs(Some(idx))
            .unwrap()
            .into_iter()
            .map(|e| e.addr)
            .collect();
        assert!(left.contains(&two) && !left.contains(&one), "{left:?}");
    });
}

#[test]
fn proxy_entries_come_and_go_on_the_upstream_link() {
    in_own_netns(|| {
        let mut nl = Rtnl::open().unwrap();
        let up = nl.ensure_dummy("lo").unwrap();
        enable_proxy_ndp("lo").unwrap();
        let on = std::fs::read_to_string("/proc/sys/net/ipv6/conf/lo/proxy_ndp").unwrap();
        assert_eq!(on.trim(), "1");

        let addr = a("2001:db8:6::42");
        nl.add_proxy(up, addr).unwrap();
        let got: Vec<_> = nl
            .proxies(up)
            .unwrap()
            .into_iter()
            .map(|n| n.addr)
            .collect();
        assert_eq!(got, vec![addr]);
        nl.del_proxy(up, addr).unwrap();
        nl.del_proxy(up, addr).unwrap(); // already gone: not an error
        assert!(nl.proxies(up).unwrap().is_empty());
    });
}

#[test]
fn a_refusal_of_the_kernel_is_its_errno() {
    in_own_netns(|| {
        let mut nl = Rtnl::open().unwrap();
        // No link 999999 in a fresh namespace.
        let e = nl.add_addr(999_999, a("2001:db8::1")).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENODEV), "{e}");
    });
}
