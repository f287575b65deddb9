use serde_json::json;

use super::*;

fn refused(schema: Value, args: Value) -> String {
    check(&schema, &args)
        .expect_err("the arguments should be refused")
        .to_string()
}

#[test]
fn types_required_and_unknown_properties() {
    let s = json!({
        "type": "object",
        "properties": {"msg": {"type": "string"}, "n": {"type": "integer"}},
        "required": ["msg"],
        "additionalProperties": false
    });
    check(&s, &json!({"msg": "hi"})).unwrap();
    check(&s, &json!({"msg": "hi", "n": 3})).unwrap();
    // 2.0 is an integer in JSON Schema; 2.5 is not.
    check(&s, &json!({"msg": "hi", "n": 2.0})).unwrap();
    assert_eq!(
        refused(s.clone(), json!({"msg": 5})),
        "arguments at /msg: string, got number"
    );
    assert_eq!(
        refused(s.clone(), json!({"msg": "hi", "n": 2.5})),
        "arguments at /n: integer, got number"
    );
    assert_eq!(
        refused(s.clone(), json!({})),
        "arguments at /: the required property 'msg'"
    );
    assert_eq!(
        refused(s, json!({"msg": "hi", "extra": 1})),
        "arguments at /: no property 'extra' (not in the schema)"
    );
}

#[test]
fn nested_values_are_checked_where_they_are() {
    let s = json!({
        "type": "object",
        "properties": {
            "items": {"type": "array", "maxItems": 3,
                      "items": {"type": "object", "properties": {"a/b~": {"enum": ["x", "y"]}}}}
        },
        "additionalProperties": {"type": ["number", "null"]}
    });
    check(&s, &json!({"items": [{"a/b~": "x"}], "w": 1, "z": null})).unwrap();
    assert_eq!(
        refused(s.clone(), json!({"items": [{"a/b~": "x"}, {"a/b~": "q"}]})),
        r#"arguments at /items/1/a~1b~0: one of ["x", "y"]"#
    );
    assert_eq!(
        refused(s.clone(), json!({"items": [{}, {}, {}, {}]})),
        "arguments at /items: at most 3 items, got 4"
    );
    assert_eq!(
        refused(s, json!({"w": "one"})),
        "arguments at /w: number or null, got string"
    );
}

#[test]
fn bounds_on_strings_and_numbers() {
    let s = json!({"type": "object", "properties": {
        "name": {"type": "string", "minLength": 2, "maxLength": 3},
        "pct": {"type": "number", "minimum": 0, "exclusiveMaximum": 100},
        "k": {"const": 7}
    }});
    // Characters, not bytes.
    check(&s, &json!({"name": "äöü", "pct": 0, "k": 7.0})).unwrap();
    assert_eq!(
        refused(s.clone(), json!({"name": "abcd"})),
        "arguments at /name: at most 3 characters, got 4"
    );
    assert_eq!(
        refused(s.clone(), json!({"name": "a"})),
        "arguments at /name: at least 2 characters, got 1"
    );
    assert_eq!(
        refused(s.clone(), json!({"pct": 100})),
        "arguments at /pct: a number < 100, got 100"
    );
    assert_eq!(
        refused(s.clone(), json!({"pct": -1})),
        "arguments at /pct: a number >= 0, got -1"
    );
    assert_eq!(refused(s, json!({"k": 8})), "arguments at /k: the value 7");
}

#[test]
fn combinators() {
    let s = json!({"type": "object", "properties": {
        "id": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
        "one": {"oneOf": [{"type": "integer"}, {"type": "number"}]},
        "not_null": {"not": {"type": "null"}},
        "both": {"allOf": [{"type": "string"}, {"maxLength": 1}]}
    }});
    check(
        &s,
        &json!({"id": "a", "one": 1.5, "not_null": 0, "both": "x"}),
    )
    .unwrap();
    check(&s, &json!({"id": 4})).unwrap();
    assert!(refused(s.clone(), json!({"id": true})).contains("anyOf"));
    // 1 is an integer and a number: both branches match.
    assert!(refused(s.clone(), json!({"one": 1})).contains("exactly one"));
    assert!(refused(s.clone(), json!({"not_null": null})).contains("'not'"));
    assert_eq!(
        refused(s, json!({"both": "xy"})),
        "arguments at /both: at most 1 characters, got 2"
    );
}

#[test]
fn what_the_check_does_not_understand_never_refuses() {
    // Not enforced: pattern, format, $ref, unknown types and keywords.
    let s = json!({"type": "object", "properties": {
        "p": {"type": "string", "pattern": "^[0-9]+$", "format": "email"},
        "r": {"$ref": "#/$defs/x"},
        "t": {"type": "decimal"},
        "u": {"x-vendor": 1}
    }});
    check(&s, &json!({"p": "abc", "r": 1, "t": "1", "u": []})).unwrap();
    // The boolean schemas.
    check(&json!(true), &json!({"a": 1})).unwrap();
    assert_eq!(
        refused(json!(false), json!({})),
        "arguments at /: nothing (the schema is false)"
    );
    // Deeper than MAX_DEPTH: not checked there, no recursion without end.
    let mut deep = json!({"type": "string"});
    let mut arg = json!(1);
    for _ in 0..(MAX_DEPTH + 8) {
        deep = json!({"type": "object", "properties": {"x": deep}});
        arg = json!({"x": arg});
    }
    check(&deep, &arg).unwrap();
    let shallow = json!({"type": "object", "properties": {"x": {"type": "string"}}});
    assert!(check(&shallow, &json!({"x": 1})).is_err());
}

#[test]
fn messages_are_bounded_whatever_the_schema_names() {
    let long = "k".repeat(5000);
    let s = json!({"type": "object", "required": [long.clone()], "properties": {
        "e": {"enum": [long.clone(), "b", "c", "d", "e", "f", "g", "h", "i", "j"]}
    }});
    let v = check(&s, &json!({})).unwrap_err();
    assert!(
        v.expected.len() <= MAX_EXPECTED && v.expected.ends_with("..."),
        "{v}"
    );
    let v = check(&s, &json!({(long.clone()): 1, "e": "z"})).unwrap_err();
    assert!(v.expected.starts_with(r#"one of ["kkk"#), "{v}");
    assert!(v.expected.len() <= MAX_EXPECTED, "{}", v.expected.len());
    // Multi-byte characters are cut on a boundary.
    let wide = "é".repeat(300);
    let v = check(&json!({"const": wide}), &json!(1)).unwrap_err();
    assert!(v.expected.len() <= MAX_EXPECTED);
}
