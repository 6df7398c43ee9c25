use std::fmt;

/// A stored 201 body. It carries the delete token, so it is a secret:
/// `Debug` never prints it and it is never logged, listed or exported.
#[derive(Clone, PartialEq, Eq)]
pub struct ResponseBody(String);

impl ResponseBody {
    pub fn new(body: String) -> Self {
        Self(body)
    }

    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn into_inner(self) -> String {
        self.0
    }
}

impl fmt::Debug for ResponseBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ResponseBody(<{} bytes redacted>)", self.0.len())
    }
}
