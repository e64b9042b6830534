//! `junit.xml`: the gate's threshold checks as JUnit test results, which CI systems (GitHub
//! Actions reporters, GitLab, Jenkins) show per test: one `<testsuite>` per point, one
//! `<testcase>` per threshold at that point, `<failure>` when breached and `<skipped>`
//! when the repeats could not decide.

use quick_xml::events::{BytesDecl, BytesEnd, BytesStart, Event};
use quick_xml::Writer;

use coordbench_analysis::compare::checks::{Check, CheckOutcome};

/// The document for `checks` of the gate `name`, run for `seconds`.
pub fn document(name: &str, checks: &[Check], seconds: f64) -> Result<String, std::io::Error> {
    let mut w = Writer::new_with_indent(Vec::new(), b' ', 2);
    w.write_event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)))?;
    let failures = count(checks, CheckOutcome::Breached);
    let skipped = count(checks, CheckOutcome::NoVerdict);
    let mut suites = BytesStart::new("testsuites");
    suites.push_attribute(("name", format!("coordbench gate {name}").as_str()));
    push_counts(&mut suites, checks.len(), failures, skipped);
    suites.push_attribute(("time", format!("{seconds:.1}").as_str()));
    w.write_event(Event::Start(suites))?;
    for point in points(checks) {
        let of_point: Vec<&Check> = checks.iter().filter(|c| c.point == point).collect();
        let mut suite = BytesStart::new("testsuite");
        suite.push_attribute(("name", point.as_str()));
        let in_point = |o| of_point.iter().filter(|c| c.outcome == o).count();
        push_counts(
            &mut suite,
            of_point.len(),
            in_point(CheckOutcome::Breached),
            in_point(CheckOutcome::NoVerdict),
        );
        w.write_event(Event::Start(suite))?;
        for check in of_point {
            testcase(&mut w, name, check)?;
        }
        w.write_event(Event::End(BytesEnd::new("testsuite")))?;
    }
    w.write_event(Event::End(BytesEnd::new("testsuites")))?;
    let mut text = String::from_utf8(w.into_inner()).map_err(std::io::Error::other)?;
    text.push('\n');
    Ok(text)
}

fn testcase(w: &mut Writer<Vec<u8>>, gate: &str, check: &Check) -> Result<(), std::io::Error> {
    let mut case = BytesStart::new("testcase");
    case.push_attribute((
        "classname",
        format!("coordbench.gate.{gate}.{}", check.point).as_str(),
    ));
    case.push_attribute(("name", check.threshold.as_str()));
    let child = match check.outcome {
        CheckOutcome::Passed => None,
        CheckOutcome::Breached => Some("failure"),
        CheckOutcome::NoVerdict => Some("skipped"),
    };
    let Some(child) = child else {
        return w.write_event(Event::Empty(case));
    };
    w.write_event(Event::Start(case))?;
    let mut element = BytesStart::new(child);
    let message = format!("{} ({})", check.detail, check.test);
    element.push_attribute(("message", message.as_str()));
    w.write_event(Event::Empty(element))?;
    w.write_event(Event::End(BytesEnd::new("testcase")))
}

fn push_counts(element: &mut BytesStart, tests: usize, failures: usize, skipped: usize) {
    element.push_attribute(("tests", tests.to_string().as_str()));
    element.push_attribute(("failures", failures.to_string().as_str()));
    element.push_attribute(("errors", "0"));
    element.push_attribute(("skipped", skipped.to_string().as_str()));
}

fn count(checks: &[Check], outcome: CheckOutcome) -> usize {
    checks.iter().filter(|c| c.outcome == outcome).count()
}

/// Point labels in first-seen order.
fn points(checks: &[Check]) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    for c in checks {
        if !seen.contains(&c.point) {
            seen.push(c.point.clone());
        }
    }
    seen
}

#[cfg(test)]
mod tests {
    use super::*;
    use quick_xml::events::Event;
    use quick_xml::Reader;

    fn check(point: &str, threshold: &str, outcome: CheckOutcome) -> Check {
        Check {
            threshold: threshold.into(),
            point: point.into(),
            outcome,
            detail: "-14.0% [-16.0%, -12.0%], p=0.008 & <odd> \"chars\"".into(),
            base_median: 1.0,
            cand_median: 0.86,
            p_value: None,
            level: None,
            test: "paired Wilcoxon signed-rank, 10 pairs".into(),
        }
    }

    #[test]
    fn the_document_parses_with_one_testcase_per_threshold_and_point() {
        let checks = vec![
            check(
                "raft kv-put",
                "throughput_ops_s max_drop 5%",
                CheckOutcome::Breached,
            ),
            check("raft kv-put", "p99_us max_rise 10%", CheckOutcome::Passed),
            check(
                "zab lock",
                "throughput_ops_s max_drop 5%",
                CheckOutcome::Passed,
            ),
            check("zab lock", "violations max 0", CheckOutcome::NoVerdict),
        ];
        let xml = document("engines", &checks, 12.5).unwrap();
        let mut reader = Reader::from_str(&xml);
        let (mut cases, mut failures, mut skipped, mut suites) = (0, 0, 0, 0);
        loop {
            match reader.read_event().unwrap() {
                Event::Eof => break,
                Event::Start(e) | Event::Empty(e) => match e.name().as_ref() {
                    b"testcase" => cases += 1,
                    b"failure" => failures += 1,
                    b"skipped" => skipped += 1,
                    b"testsuite" => suites += 1,
                    _ => {}
                },
                _ => {}
            }
        }
        assert_eq!((suites, cases, failures, skipped), (2, 4, 1, 1));
        assert!(
            xml.contains(r#"<testsuites name="coordbench gate engines" tests="4" failures="1""#),
            "{xml}"
        );
        assert!(xml.contains("&amp; &lt;odd&gt;"), "{xml}");
        // A failure's message names the test that decided it.
        assert!(
            xml.contains("p=0.008 &amp; &lt;odd&gt; &quot;chars&quot; (paired Wilcoxon signed-rank, 10 pairs)\""),
            "{xml}"
        );
    }
}
