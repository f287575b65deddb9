//! Aligned text tables for agentctl's human output.
//!
//! Columns are sized to their widest cell (counted in chars, so UTF-8
//! names do not skew alignment); numeric columns align right so scores
//! and counts can be compared at a glance.

/// Horizontal alignment of one column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// A header row plus data rows, rendered with two spaces between columns.
#[derive(Debug, Clone)]
pub struct Table {
    headers: Vec<&'static str>,
    align: Vec<Align>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// All columns left-aligned; see [`Table::right`].
    pub fn new(headers: &[&'static str]) -> Table {
        Table {
            headers: headers.to_vec(),
            align: vec![Align::Left; headers.len()],
            rows: Vec::new(),
        }
    }

    /// Right-aligns column `col` (0-based).
    pub fn right(mut self, col: usize) -> Table {
        if let Some(a) = self.align.get_mut(col) {
            *a = Align::Right;
        }
        self
    }

    /// Adds a row; missing cells render empty, extra cells are dropped.
    pub fn row(&mut self, cells: Vec<String>) {
        let mut cells = cells;
        cells.resize(self.headers.len(), String::new());
        self.rows.push(cells);
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn render(&self) -> String {
        let mut width: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (w, cell) in width.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let mut out = String::new();
        let headers: Vec<String> = self.headers.iter().map(|h| h.to_string()).collect();
        for row in std::iter::once(&headers).chain(&self.rows) {
            let mut line = String::new();
            for (i, cell) in row.iter().enumerate() {
                if i > 0 {
                    line.push_str("  ");
                }
                let pad = width[i] - cell.chars().count();
                let last = i + 1 == row.len();
                match self.align[i] {
                    Align::Right => {
                        line.extend(std::iter::repeat_n(' ', pad));
                        line.push_str(cell);
                    }
                    Align::Left => {
                        line.push_str(cell);
                        if !last {
                            line.extend(std::iter::repeat_n(' ', pad));
                        }
                    }
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_to_the_widest_cell() {
        let mut t = Table::new(&["ID", "SCORE", "NAME"]).right(1);
        t.row(vec!["a".into(), "5".into(), "x".into()]);
        t.row(vec!["longer".into(), "12345".into(), "é".into()]);
        assert_eq!(
            t.render(),
            "ID      SCORE  NAME\na           5  x\nlonger  12345  é\n"
        );
    }

    #[test]
    fn short_rows_are_padded_and_trailing_space_trimmed() {
        let mut t = Table::new(&["A", "B"]);
        t.row(vec!["1".into()]);
        assert_eq!(t.render(), "A  B\n1\n");
    }
}
