//===- ir/Parser.cpp - The .rir text format: parsing ----------------------===//
//
// A hand-written lexer over llvm::StringRef (tokens are slices of the input;
// only names and strings with escapes are copied) and a recursive-descent
// parser that builds the Graph as it goes.
//
// Forward references: a node whose operands are all defined earlier in the
// text is created with them at once. A node that uses a name not yet defined
// is created without operands and remembered; once the whole graph has been
// read, its operands are resolved and added. This lets a misordered schedule
// or a cycle parse, so that the Verifier can report it, while a name that is
// never defined is an error at its first use.
//
//===----------------------------------------------------------------------===//

#include "ir/Parser.h"

#include "ir/Limits.h"
#include "ir/Printer.h"
#include "ir/ShapeInference.h"
#include "ir/Support.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Allocator.h"
#include "llvm/Support/ConvertUTF.h"
#include "llvm/Support/StringSaver.h"

#include <cassert>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

using namespace remat;
using namespace remat::ir;

namespace {

//===----------------------------------------------------------------------===//
// Lexer
//===----------------------------------------------------------------------===//

enum class TokenKind : uint8_t {
  Eof,
  Error, ///< The lexer's message is in Lexer::getErrorMessage().
  Identifier,
  ValueName, ///< %name or %"quoted name"
  GraphName, ///< @name or @"quoted name"
  Integer,   ///< Unsigned; a sign is a separate Minus token.
  Float,
  String,
  LParen,
  RParen,
  LBrace,
  RBrace,
  LSquare,
  RSquare,
  LAngle,
  RAngle,
  Comma,
  Colon,
  Equal,
  Minus,
};

struct Token {
  TokenKind kind = TokenKind::Eof;
  /// The token's full spelling in the input (quotes and sigils included).
  llvm::StringRef text;
  /// 1-based position in the text (before the line offset is added).
  uint32_t line = 0;
  uint32_t col = 0;

  bool is(TokenKind other) const { return kind == other; }
  bool isKeyword(llvm::StringRef word) const {
    return kind == TokenKind::Identifier && text == word;
  }
};

bool isNameChar(char c) {
  return llvm::isAlnum(c) || c == '_' || c == '.' || c == '$' || c == '/' ||
         c == '-';
}

bool isIdentifierStart(char c) { return llvm::isAlpha(c) || c == '_'; }
bool isIdentifierChar(char c) {
  return llvm::isAlnum(c) || c == '_' || c == '.';
}

class Lexer {
public:
  explicit Lexer(llvm::StringRef text)
      : cur_(text.begin()), end_(text.end()), lineStart_(text.begin()) {}

  Token next();

  const std::string &getErrorMessage() const { return errorMessage_; }

private:
  Token make(TokenKind kind, const char *start, uint32_t line,
             uint32_t col) const {
    return Token{kind, llvm::StringRef(start, cur_ - start), line, col};
  }
  uint32_t colOf(const char *p) const { return p - lineStart_ + 1; }
  Token error(const char *at, const llvm::Twine &message);
  void skipWhitespaceAndComments();
  Token lexNumber(const char *start);
  Token lexName(TokenKind kind, const char *start);
  /// Advances past a string whose opening quote is at cur_[-1].
  /// \returns false (with the error token in \p errorToken) on failure.
  bool skipString(const char *start, Token &errorToken);

  const char *cur_;
  const char *end_;
  const char *lineStart_;
  uint32_t line_ = 1;
  std::string errorMessage_;
};

Token Lexer::error(const char *at, const llvm::Twine &message) {
  errorMessage_ = message.str();
  // Stop lexing: every later call returns Eof, and the parser reports this
  // error as soon as it looks at the token.
  Token token{TokenKind::Error, llvm::StringRef(at, 0), line_, colOf(at)};
  cur_ = end_;
  return token;
}

void Lexer::skipWhitespaceAndComments() {
  while (cur_ != end_) {
    char c = *cur_;
    if (c == '\n') {
      ++cur_;
      ++line_;
      lineStart_ = cur_;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
      ++cur_;
      continue;
    }
    if (c == '/' && cur_ + 1 != end_ && cur_[1] == '/') {
      while (cur_ != end_ && *cur_ != '\n')
        ++cur_;
      continue;
    }
    return;
  }
}

Token Lexer::next() {
  skipWhitespaceAndComments();
  const char *start = cur_;
  uint32_t col = colOf(start);
  if (cur_ == end_)
    return Token{TokenKind::Eof, llvm::StringRef(cur_, 0), line_, col};

  char c = *cur_++;
  switch (c) {
  case '(':
    return make(TokenKind::LParen, start, line_, col);
  case ')':
    return make(TokenKind::RParen, start, line_, col);
  case '{':
    return make(TokenKind::LBrace, start, line_, col);
  case '}':
    return make(TokenKind::RBrace, start, line_, col);
  case '[':
    return make(TokenKind::LSquare, start, line_, col);
  case ']':
    return make(TokenKind::RSquare, start, line_, col);
  case '<':
    return make(TokenKind::LAngle, start, line_, col);
  case '>':
    return make(TokenKind::RAngle, start, line_, col);
  case ',':
    return make(TokenKind::Comma, start, line_, col);
  case ':':
    return make(TokenKind::Colon, start, line_, col);
  case '=':
    return make(TokenKind::Equal, start, line_, col);
  case '-':
    return make(TokenKind::Minus, start, line_, col);
  case '%':
    return lexName(TokenKind::ValueName, start);
  case '@':
    return lexName(TokenKind::GraphName, start);
  case '"': {
    Token errorToken;
    if (!skipString(start, errorToken))
      return errorToken;
    return make(TokenKind::String, start, line_, col);
  }
  default:
    break;
  }
  if (llvm::isDigit(c))
    return lexNumber(start);
  if (isIdentifierStart(c)) {
    while (cur_ != end_ && isIdentifierChar(*cur_))
      ++cur_;
    return make(TokenKind::Identifier, start, line_, col);
  }
  auto byte = static_cast<unsigned char>(c);
  if (byte < 0x20 || byte >= 0x7f)
    return error(start, "unexpected character '\\x" +
                            llvm::Twine(llvm::hexdigit(byte >> 4)) +
                            llvm::Twine(llvm::hexdigit(byte & 15)) + "'");
  return error(start, "unexpected character '" + llvm::Twine(c) + "'");
}

Token Lexer::lexNumber(const char *start) {
  uint32_t col = colOf(start);
  bool isFloatLiteral = false;
  while (cur_ != end_ && llvm::isDigit(*cur_))
    ++cur_;
  if (cur_ != end_ && *cur_ == '.') {
    isFloatLiteral = true;
    ++cur_;
    while (cur_ != end_ && llvm::isDigit(*cur_))
      ++cur_;
  }
  if (cur_ != end_ && (*cur_ == 'e' || *cur_ == 'E')) {
    isFloatLiteral = true;
    ++cur_;
    if (cur_ != end_ && (*cur_ == '+' || *cur_ == '-'))
      ++cur_;
    const char *digits = cur_;
    while (cur_ != end_ && llvm::isDigit(*cur_))
      ++cur_;
    if (cur_ == digits) {
      while (cur_ != end_ && isIdentifierChar(*cur_))
        ++cur_;
      return error(start, "invalid number '" +
                              llvm::StringRef(start, cur_ - start) + "'");
    }
  }
  // "12abc", "1.5.3": a number runs into a name.
  if (cur_ != end_ && isIdentifierChar(*cur_)) {
    while (cur_ != end_ && isIdentifierChar(*cur_))
      ++cur_;
    return error(start, "invalid number '" +
                            llvm::StringRef(start, cur_ - start) + "'");
  }
  if (isFloatLiteral)
    return make(TokenKind::Float, start, line_, col);
  // The magnitude of the most negative int64 is the largest integer token.
  llvm::StringRef text(start, cur_ - start);
  uint64_t magnitude;
  if (text.getAsInteger(10, magnitude) ||
      magnitude > uint64_t(std::numeric_limits<int64_t>::max()) + 1)
    return error(start, "integer '" + text + "' does not fit in 64 bits");
  return make(TokenKind::Integer, start, line_, col);
}

Token Lexer::lexName(TokenKind kind, const char *start) {
  uint32_t col = colOf(start);
  if (cur_ != end_ && *cur_ == '"') {
    ++cur_;
    Token errorToken;
    if (!skipString(cur_ - 1, errorToken))
      return errorToken;
    return make(kind, start, line_, col);
  }
  while (cur_ != end_ && isNameChar(*cur_))
    ++cur_;
  if (cur_ == start + 1)
    return error(start, llvm::Twine("expected a name after '") +
                            llvm::StringRef(start, 1) + "'");
  return make(kind, start, line_, col);
}

bool Lexer::skipString(const char *start, Token &errorToken) {
  while (cur_ != end_) {
    char c = *cur_;
    if (c == '"') {
      ++cur_;
      return true;
    }
    if (c == '\n')
      break;
    if (c != '\\') {
      ++cur_;
      continue;
    }
    const char *escape = cur_;
    ++cur_;
    if (cur_ == end_)
      break;
    char kind = *cur_++;
    if (kind == '"' || kind == '\\' || kind == 'n' || kind == 't')
      continue;
    if (kind == 'x' && end_ - cur_ >= 2 && llvm::isHexDigit(cur_[0]) &&
        llvm::isHexDigit(cur_[1])) {
      cur_ += 2;
      continue;
    }
    errorToken = error(escape, "invalid escape sequence in string");
    return false;
  }
  errorToken = error(start, "unterminated string");
  return false;
}

/// \returns the contents of a string whose spelling (quotes included) is
/// \p quoted, with escapes decoded. The lexer has validated the escapes.
/// Strings without escapes are returned as slices of the input.
llvm::StringRef unquote(llvm::StringRef quoted, llvm::StringSaver &saver) {
  assert(quoted.size() >= 2 && quoted.front() == '"' && quoted.back() == '"');
  llvm::StringRef body = quoted.drop_front().drop_back();
  if (body.find('\\') == llvm::StringRef::npos)
    return body;
  llvm::SmallString<64> decoded;
  for (size_t i = 0; i < body.size(); ++i) {
    char c = body[i];
    if (c != '\\') {
      decoded.push_back(c);
      continue;
    }
    char kind = body[++i];
    switch (kind) {
    case 'n':
      decoded.push_back('\n');
      break;
    case 't':
      decoded.push_back('\t');
      break;
    case 'x':
      decoded.push_back(
          static_cast<char>(llvm::hexFromNibbles(body[i + 1], body[i + 2])));
      i += 2;
      break;
    default: // '"' and '\\'
      decoded.push_back(kind);
      break;
    }
  }
  return saver.save(llvm::StringRef(decoded));
}

/// \returns whether \p text is valid UTF-8.
static bool isLegalUtf8(llvm::StringRef text) {
  const auto *begin = reinterpret_cast<const llvm::UTF8 *>(text.data());
  return llvm::isLegalUTF8String(&begin, begin + text.size());
}

//===----------------------------------------------------------------------===//
// Literals
//===----------------------------------------------------------------------===//

/// A number, bool or inf/nan as written; converted once its type is known.
struct Literal {
  enum Kind : uint8_t { Int, Float, Bool } kind = Int;
  bool negative = false;
  bool boolValue = false;
  /// The spelling without the sign ("1.5", "inf", "42").
  llvm::StringRef text;
  Token token; ///< The first token (the minus sign, if any).

  std::string spelling() const {
    if (kind == Bool)
      return boolValue ? "true" : "false";
    return (llvm::Twine(negative ? "-" : "") + text).str();
  }
};

/// Converts a float literal's unsigned spelling with strtof/strtod semantics
/// (underflow gives zero or a subnormal). \returns false when the value
/// overflows.
template <typename FloatT>
bool convertFloat(llvm::StringRef text, FloatT &value) {
  if (text == "inf") {
    value = std::numeric_limits<FloatT>::infinity();
    return true;
  }
  if (text == "nan") {
    value = std::numeric_limits<FloatT>::quiet_NaN();
    return true;
  }
  auto result = std::from_chars(text.begin(), text.end(), value);
  if (result.ec == std::errc() && result.ptr == text.end())
    return true;
  if (result.ec != std::errc::result_out_of_range)
    return false;
  // from_chars reports underflow as out of range too; strtod tells the two
  // apart.
  std::string copy = text.str();
  if constexpr (std::is_same_v<FloatT, float>)
    value = std::strtof(copy.c_str(), nullptr);
  else
    value = std::strtod(copy.c_str(), nullptr);
  return !std::isinf(value);
}

//===----------------------------------------------------------------------===//
// Parser
//===----------------------------------------------------------------------===//

/// A splat (`dense<T: 0.0>`) larger than this is an error: a typo in a
/// dim should not turn into a terabyte allocation.
constexpr int64_t kMaxSplatBytes = int64_t(1) << 31;

/// A use of a name as an operand or an output.
struct NameRef {
  llvm::StringRef name;
  Loc loc;
};

/// A node created before all of its operands were defined.
struct DeferredNode {
  Node *node;
  /// Its operand references: deferredRefs_[firstRef, firstRef + numRefs).
  size_t firstRef;
  size_t numRefs;
};

class Parser {
public:
  Parser(llvm::StringRef text, llvm::StringRef sourceName, unsigned lineOffset)
      : lexer_(text), sourceName_(sourceName), lineOffset_(lineOffset),
        saver_(allocator_) {}

  llvm::Expected<std::unique_ptr<Graph>> parse();

private:
  llvm::Error parseAndCheck();

  //===--- Tokens and errors ----------------------------------------------===//

  void advance() { tok_ = lexer_.next(); }
  Loc locOf(const Token &token) const {
    return Loc{token.line + lineOffset_, token.col};
  }
  /// "file:line:col: ", as Node::describe() writes it.
  std::string prefix(Loc loc) const { return graph_->formatLoc(loc); }
  llvm::Error errorAt(Loc loc, const llvm::Twine &message) const {
    return makeError(prefix(loc) + message);
  }
  llvm::Error errorAt(const Token &token, const llvm::Twine &message) const {
    return errorAt(locOf(token), message);
  }
  /// Reports an error that a Graph API (checkArity, checkResultTypes, ...)
  /// returned for something at \p loc, adding the location unless the
  /// message already starts with it.
  llvm::Error withLoc(Loc loc, llvm::Error err) const;
  /// "expected <what> but found <current token>", or the lexer's error when
  /// the current token is one.
  llvm::Error expectedError(const llvm::Twine &what) const;
  /// Consumes a token of \p kind, else reports expectedError(\p what).
  llvm::Error expect(TokenKind kind, llvm::StringRef what);
  bool consumeIf(TokenKind kind) {
    if (!tok_.is(kind))
      return false;
    advance();
    return true;
  }

  //===--- Grammar --------------------------------------------------------===//

  llvm::Error parseGraphHeader();
  llvm::Error parseInput();
  llvm::Error parseNode();
  llvm::Error parseReturn();
  llvm::Error parseType(TensorType &type);
  llvm::Error parseAttrDict(AttrList &attrs);
  llvm::Error parseAttrValue(AttrValue &value);
  llvm::Error parseAttrList(AttrValue &value);
  llvm::Error parseDense(TensorDataPtr &data);
  llvm::Error parseLiteral(Literal &literal);
  llvm::Error parseName(TokenKind kind, llvm::StringRef &name, Loc &loc);

  llvm::Expected<int64_t> toInt(const Literal &literal) const;
  llvm::Expected<float> toFloat(const Literal &literal) const;
  /// Writes \p literal as one element of \p dtype at \p out.
  llvm::Error encodeElement(DType dtype, const Literal &literal,
                            uint8_t *out) const;

  //===--- Names ----------------------------------------------------------===//

  /// Records \p value as the definition of \p name.
  llvm::Error define(llvm::StringRef name, Loc loc, Value *value);
  /// Adds the operands of deferred nodes and checks their arity. Every name
  /// is defined by then (parseReturn reports the first undefined use).
  llvm::Error resolveForwardReferences();
  /// Parses the marks after a node's stage: `origin(%x)` and `grad(...)`
  /// (one weight or `_` per result).
  llvm::Error parseNodeMarks(Node *node);
  /// Sets the origins parseNodeMarks read, once every node is known.
  llvm::Error resolveOrigins();
  std::string quoteName(llvm::StringRef name) const {
    std::string text;
    llvm::raw_string_ostream os(text);
    printValueRef(name, os);
    return os.str();
  }

  Lexer lexer_;
  Token tok_;
  llvm::StringRef sourceName_;
  unsigned lineOffset_;
  llvm::BumpPtrAllocator allocator_;
  llvm::StringSaver saver_;

  std::unique_ptr<Graph> graph_;
  llvm::StringMap<Value *> values_;
  /// Uses of names that were not defined when they were read, in text order.
  std::vector<NameRef> forwardRefs_;
  std::vector<DeferredNode> deferredNodes_;
  std::vector<NameRef> deferredRefs_;
  llvm::DenseSet<const Node *> deferredSet_;
  /// Each `origin(%x)` read: the copy and the name of its original.
  std::vector<std::pair<Node *, NameRef>> origins_;
};

llvm::Error Parser::withLoc(Loc loc, llvm::Error err) const {
  std::string message = errorToString(std::move(err));
  std::string locPrefix = prefix(loc);
  if (llvm::StringRef(message).startswith(locPrefix))
    return makeError(message);
  return makeError(locPrefix + message);
}

llvm::Error Parser::expectedError(const llvm::Twine &what) const {
  if (tok_.is(TokenKind::Error))
    return errorAt(tok_, lexer_.getErrorMessage());
  if (tok_.is(TokenKind::Eof))
    return errorAt(tok_, "expected " + what + " but found end of input");
  llvm::StringRef found = tok_.text;
  if (found.size() > 40)
    return errorAt(tok_, "expected " + what + " but found '" +
                             found.take_front(40) + "...'");
  return errorAt(tok_, "expected " + what + " but found '" + found + "'");
}

llvm::Error Parser::expect(TokenKind kind, llvm::StringRef what) {
  if (!tok_.is(kind))
    return expectedError(what);
  advance();
  return llvm::Error::success();
}

llvm::Error Parser::parseName(TokenKind kind, llvm::StringRef &name, Loc &loc) {
  if (!tok_.is(kind))
    return expectedError(kind == TokenKind::ValueName ? "a value name"
                                                      : "a graph name");
  loc = locOf(tok_);
  llvm::StringRef spelling = tok_.text.drop_front();
  name = spelling.startswith("\"") ? unquote(spelling, saver_) : spelling;
  if (name.empty())
    return errorAt(loc, "empty name");
  // Names reach ONNX files and JSON reports, whose strings are UTF-8.
  if (!isLegalUtf8(name))
    return errorAt(loc, "name '" + quoteName(name) + "' is not valid UTF-8");
  advance();
  return llvm::Error::success();
}

llvm::Error Parser::define(llvm::StringRef name, Loc loc, Value *value) {
  if (!values_.try_emplace(name, value).second)
    return errorAt(loc, "redefinition of value '" + quoteName(name) + "'");
  return llvm::Error::success();
}

//===--- Graph ------------------------------------------------------------===//

llvm::Expected<std::unique_ptr<Graph>> Parser::parse() {
  graph_ = std::make_unique<Graph>();
  graph_->setSourceName(sourceName_);
  if (auto err = parseAndCheck()) {
    // The graph may hold uses of values defined later in the schedule; drop
    // every use while all values are alive so that destruction order does
    // not matter.
    for (Node &node : graph_->getNodes())
      node.dropAllOperands();
    return std::move(err);
  }
  return std::move(graph_);
}

llvm::Error Parser::parseAndCheck() {
  advance();
  if (auto err = parseGraphHeader())
    return err;
  while (!tok_.isKeyword("return"))
    if (auto err = parseNode())
      return err;
  if (auto err = parseReturn())
    return err;
  if (!tok_.is(TokenKind::Eof))
    return expectedError("end of input");
  if (auto err = resolveForwardReferences())
    return err;
  if (auto err = resolveOrigins())
    return err;

  // Now that every operand is known, check declared types against
  // inference, except for nodes that use a value defined later: the Verifier
  // reports those.
  for (const Node &node : graph_->getNodes()) {
    if (deferredSet_.count(&node))
      continue;
    if (auto err = checkResultTypes(node))
      return withLoc(node.getLoc(), std::move(err));
  }
  return llvm::Error::success();
}

llvm::Error Parser::parseGraphHeader() {
  if (!tok_.isKeyword("graph"))
    return expectedError("'graph'");
  advance();
  llvm::StringRef name;
  Loc loc;
  if (auto err = parseName(TokenKind::GraphName, name, loc))
    return err;
  graph_->setName(name);
  if (auto err = expect(TokenKind::LParen, "'('"))
    return err;
  if (!consumeIf(TokenKind::RParen)) {
    do {
      if (auto err = parseInput())
        return err;
    } while (consumeIf(TokenKind::Comma));
    if (auto err = expect(TokenKind::RParen, "')'"))
      return err;
  }
  return expect(TokenKind::LBrace, "'{'");
}

llvm::Error Parser::parseInput() {
  llvm::StringRef name;
  Loc loc;
  if (auto err = parseName(TokenKind::ValueName, name, loc))
    return err;
  if (auto err = expect(TokenKind::Colon, "':'"))
    return err;
  TensorType type;
  if (auto err = parseType(type))
    return err;
  bool isWeight = false;
  if (tok_.isKeyword("weight")) {
    isWeight = true;
    advance();
  }
  TensorDataPtr data;
  if (consumeIf(TokenKind::Equal)) {
    Token denseToken = tok_;
    if (auto err = parseDense(data))
      return err;
    if (data->getType() != type)
      return errorAt(denseToken, "data of type " + data->getType().str() +
                                     " does not match input '" +
                                     quoteName(name) + "' of type " +
                                     type.str());
  }
  Value *input = graph_->addInput(name, type, isWeight);
  input->setLoc(loc);
  if (data)
    input->setData(std::move(data));
  return define(name, loc, input);
}

llvm::Error Parser::parseNode() {
  // Results.
  llvm::SmallVector<std::string, 2> resultNames;
  llvm::SmallVector<Loc, 2> resultLocs;
  // A node starts with a result; say that 'return' would also do.
  if (!tok_.is(TokenKind::ValueName))
    return expectedError("a value name or 'return'");
  do {
    llvm::StringRef name;
    Loc loc;
    if (auto err = parseName(TokenKind::ValueName, name, loc))
      return err;
    resultNames.push_back(name.str());
    resultLocs.push_back(loc);
  } while (consumeIf(TokenKind::Comma));
  if (auto err = expect(TokenKind::Equal, "'='"))
    return err;

  // Op.
  if (!tok_.is(TokenKind::Identifier))
    return expectedError("an op name");
  Token opToken = tok_;
  llvm::StringRef spelling = tok_.text;
  llvm::StringRef domain, opName = spelling;
  size_t dot = spelling.rfind('.');
  if (dot != llvm::StringRef::npos) {
    domain = spelling.take_front(dot);
    opName = spelling.drop_front(dot + 1);
  }
  std::optional<OpKind> op = lookupOp(domain, opName);
  if (!op)
    return errorAt(opToken, "unknown op '" + spelling + "'");
  advance();

  // Operands.
  if (auto err = expect(TokenKind::LParen, "'('"))
    return err;
  llvm::SmallVector<NameRef, 4> operandRefs;
  llvm::SmallVector<Value *, 4> operands;
  bool hasForwardRef = false;
  if (!consumeIf(TokenKind::RParen)) {
    do {
      NameRef ref;
      if (auto err = parseName(TokenKind::ValueName, ref.name, ref.loc))
        return err;
      operandRefs.push_back(ref);
      auto it = values_.find(ref.name);
      if (it == values_.end()) {
        hasForwardRef = true;
        forwardRefs_.push_back(ref);
        continue;
      }
      operands.push_back(it->second);
    } while (consumeIf(TokenKind::Comma));
    if (auto err = expect(TokenKind::RParen, "')'"))
      return err;
  }

  // Attributes, result types, stage.
  AttrList attrs;
  if (tok_.is(TokenKind::LBrace))
    if (auto err = parseAttrDict(attrs))
      return err;
  if (auto err = expect(TokenKind::Colon, "':'"))
    return err;
  llvm::SmallVector<TensorType, 2> resultTypes;
  do {
    TensorType type;
    if (auto err = parseType(type))
      return err;
    resultTypes.push_back(std::move(type));
  } while (consumeIf(TokenKind::Comma));
  Stage stage = Stage::Forward;
  if (tok_.is(TokenKind::Identifier) && !tok_.isKeyword("return") &&
      !tok_.isKeyword("origin") && !tok_.isKeyword("grad")) {
    if (tok_.text == "bwd")
      stage = Stage::Backward;
    else if (tok_.text == "remat")
      stage = Stage::Recompute;
    else if (tok_.text != "fwd")
      return errorAt(tok_, "unknown stage '" + tok_.text +
                               "' (expected 'fwd', 'bwd' or 'remat')");
    advance();
  }

  Loc nodeLoc = resultLocs.front();
  if (resultNames.size() != resultTypes.size())
    return errorAt(
        nodeLoc,
        llvm::Twine(resultNames.size()) +
            (resultNames.size() == 1 ? " result" : " results") + " but " +
            llvm::Twine(resultTypes.size()) +
            (resultTypes.size() == 1 ? " result type" : " result types"));
  // Check for redefinition before the graph sees the names.
  for (size_t i = 0; i < resultNames.size(); ++i) {
    if (values_.count(resultNames[i]))
      return errorAt(resultLocs[i], "redefinition of value '" +
                                        quoteName(resultNames[i]) + "'");
    for (size_t j = 0; j < i; ++j)
      if (resultNames[j] == resultNames[i])
        return errorAt(resultLocs[i], "redefinition of value '" +
                                          quoteName(resultNames[i]) + "'");
  }

  Node *node =
      graph_->createNode(*op,
                         hasForwardRef ? llvm::ArrayRef<Value *>()
                                       : llvm::ArrayRef<Value *>(operands),
                         resultTypes, resultNames, std::move(attrs));
  node->setStage(stage);
  node->setLoc(nodeLoc);
  for (unsigned i = 0, e = node->getNumResults(); i != e; ++i) {
    Value *result = node->getResult(i);
    result->setLoc(resultLocs[i]);
    if (auto err = define(resultNames[i], resultLocs[i], result))
      return err;
  }
  if (auto err = parseNodeMarks(node))
    return err;
  if (hasForwardRef) {
    deferredNodes_.push_back(
        DeferredNode{node, deferredRefs_.size(), operandRefs.size()});
    deferredRefs_.insert(deferredRefs_.end(), operandRefs.begin(),
                         operandRefs.end());
    deferredSet_.insert(node);
    return llvm::Error::success();
  }
  if (auto err = checkArity(*node))
    return withLoc(nodeLoc, std::move(err));
  return llvm::Error::success();
}

llvm::Error Parser::parseNodeMarks(Node *node) {
  if (tok_.isKeyword("origin")) {
    advance();
    NameRef ref;
    if (auto err = expect(TokenKind::LParen, "'('"))
      return err;
    if (auto err = parseName(TokenKind::ValueName, ref.name, ref.loc))
      return err;
    if (auto err = expect(TokenKind::RParen, "')'"))
      return err;
    origins_.push_back({node, ref});
  }
  if (!tok_.isKeyword("grad"))
    return llvm::Error::success();
  Token gradToken = tok_;
  advance();
  if (auto err = expect(TokenKind::LParen, "'('"))
    return err;
  // One entry per result: a weight input, or `_` for a result that is no
  // weight's gradient.
  std::string label = node->getOpSpelling() + " '" +
                      quoteName(node->getResult(0)->getName()) + "'";
  unsigned i = 0;
  do {
    if (i == node->getNumResults())
      return errorAt(gradToken, "grad(...) of " + label +
                                    " has more entries than its " +
                                    llvm::Twine(node->getNumResults()) +
                                    " results");
    Value *result = node->getResult(i++);
    if (tok_.isKeyword("_")) {
      advance();
      continue;
    }
    NameRef ref;
    if (auto err = parseName(TokenKind::ValueName, ref.name, ref.loc))
      return err;
    Value *weight = values_.lookup(ref.name);
    if (!weight || !weight->isGraphInput() || !weight->isWeight())
      return errorAt(ref.loc, "grad(" + quoteName(ref.name) +
                                  ") must name a weight input of the graph");
    result->setGradientOf(weight);
  } while (consumeIf(TokenKind::Comma));
  if (i != node->getNumResults())
    return errorAt(gradToken, "grad(...) of " + label + " has " +
                                  llvm::Twine(i) + " entries for " +
                                  llvm::Twine(node->getNumResults()) +
                                  " results");
  return expect(TokenKind::RParen, "')'");
}

llvm::Error Parser::resolveOrigins() {
  llvm::DenseSet<const Node *> copies;
  for (const auto &[copy, ref] : origins_)
    copies.insert(copy);
  for (const auto &[copy, ref] : origins_) {
    Value *value = values_.lookup(ref.name);
    if (!value)
      return errorAt(ref.loc,
                     "use of undefined value '" + quoteName(ref.name) + "'");
    Node *origin = value->getDefiningNode();
    if (!origin || origin == copy || copies.count(origin) ||
        value->getResultIndex() != 0)
      return errorAt(ref.loc, "origin(" + quoteName(ref.name) +
                                  ") must name the first result of another "
                                  "node that is not a copy itself");
    copy->setOrigin(origin);
  }
  return llvm::Error::success();
}

llvm::Error Parser::parseReturn() {
  assert(tok_.isKeyword("return"));
  advance();
  llvm::SmallVector<NameRef, 4> outputs;
  do {
    NameRef ref;
    if (auto err = parseName(TokenKind::ValueName, ref.name, ref.loc))
      return err;
    if (!values_.count(ref.name))
      forwardRefs_.push_back(ref);
    outputs.push_back(ref);
  } while (consumeIf(TokenKind::Comma));
  if (auto err = expect(TokenKind::RBrace, "'}'"))
    return err;
  // Every definition has been read: a name still unknown is undefined.
  for (const NameRef &ref : forwardRefs_)
    if (!values_.count(ref.name))
      return errorAt(ref.loc,
                     "use of undefined value '" + quoteName(ref.name) + "'");
  for (const NameRef &ref : outputs)
    graph_->addOutput(values_.lookup(ref.name));
  return llvm::Error::success();
}

llvm::Error Parser::resolveForwardReferences() {
  for (const DeferredNode &deferred : deferredNodes_) {
    for (size_t i = 0; i < deferred.numRefs; ++i) {
      const NameRef &ref = deferredRefs_[deferred.firstRef + i];
      Value *value = values_.lookup(ref.name);
      assert(value && "undefined names are reported by parseReturn");
      deferred.node->addOperand(value);
    }
    if (auto err = checkArity(*deferred.node))
      return withLoc(deferred.node->getLoc(), std::move(err));
  }
  return llvm::Error::success();
}

//===--- Types ------------------------------------------------------------===//

llvm::Error Parser::parseType(TensorType &type) {
  if (!tok_.is(TokenKind::Identifier))
    return expectedError("a type");
  Token typeToken = tok_;
  std::optional<DType> dtype = parseDType(tok_.text);
  if (!dtype)
    return errorAt(tok_, "unknown dtype '" + tok_.text + "'");
  advance();
  if (auto err = expect(TokenKind::LSquare, "'['"))
    return err;
  llvm::SmallVector<int64_t, 4> dims;
  if (!consumeIf(TokenKind::RSquare)) {
    do {
      if (tok_.is(TokenKind::Minus))
        return errorAt(tok_, "dims must be non-negative");
      if (!tok_.is(TokenKind::Integer))
        return expectedError("a dim");
      Literal literal;
      literal.text = tok_.text;
      literal.token = tok_;
      llvm::Expected<int64_t> dim = toInt(literal);
      if (!dim)
        return dim.takeError();
      dims.push_back(*dim);
      advance();
    } while (consumeIf(TokenKind::Comma));
    if (auto err = expect(TokenKind::RSquare, "']'"))
      return err;
  }
  type = TensorType(*dtype, dims);
  if (auto err = type.checkSize())
    return withLoc(locOf(typeToken), std::move(err));
  return llvm::Error::success();
}

//===--- Attributes -------------------------------------------------------===//

llvm::Error Parser::parseAttrDict(AttrList &attrs) {
  assert(tok_.is(TokenKind::LBrace));
  advance();
  if (consumeIf(TokenKind::RBrace))
    return llvm::Error::success();
  do {
    if (!tok_.is(TokenKind::Identifier))
      return expectedError("an attribute name");
    Token nameToken = tok_;
    advance();
    if (attrs.has(nameToken.text))
      return errorAt(nameToken, "duplicate attribute '" + nameToken.text + "'");
    if (auto err = expect(TokenKind::Equal, "'='"))
      return err;
    AttrValue value;
    if (auto err = parseAttrValue(value))
      return err;
    attrs.set(nameToken.text, std::move(value));
  } while (consumeIf(TokenKind::Comma));
  return expect(TokenKind::RBrace, "'}'");
}

llvm::Error Parser::parseAttrValue(AttrValue &value) {
  if (tok_.is(TokenKind::String)) {
    value = unquote(tok_.text, saver_).str();
    advance();
    return llvm::Error::success();
  }
  if (tok_.is(TokenKind::LSquare))
    return parseAttrList(value);
  if (tok_.isKeyword("dense")) {
    TensorDataPtr data;
    if (auto err = parseDense(data))
      return err;
    value = std::move(data);
    return llvm::Error::success();
  }
  if (!tok_.is(TokenKind::Minus) && !tok_.is(TokenKind::Integer) &&
      !tok_.is(TokenKind::Float) && !tok_.isKeyword("inf") &&
      !tok_.isKeyword("nan"))
    return expectedError("an attribute value");
  Literal literal;
  if (auto err = parseLiteral(literal))
    return err;
  if (literal.kind == Literal::Bool)
    return errorAt(literal.token, "expected an attribute value but found '" +
                                      literal.spelling() + "'");
  if (literal.kind == Literal::Int) {
    llvm::Expected<int64_t> intValue = toInt(literal);
    if (!intValue)
      return intValue.takeError();
    value = *intValue;
    return llvm::Error::success();
  }
  llvm::Expected<float> floatValue = toFloat(literal);
  if (!floatValue)
    return floatValue.takeError();
  value = *floatValue;
  return llvm::Error::success();
}

llvm::Error Parser::parseAttrList(AttrValue &value) {
  assert(tok_.is(TokenKind::LSquare));
  advance();
  if (consumeIf(TokenKind::RSquare)) {
    value = std::vector<int64_t>();
    return llvm::Error::success();
  }
  std::vector<std::string> strings;
  std::vector<Literal> numbers;
  do {
    if (tok_.is(TokenKind::String)) {
      if (!numbers.empty())
        return errorAt(tok_, "list mixes numbers and strings");
      strings.push_back(unquote(tok_.text, saver_).str());
      advance();
      continue;
    }
    if (!strings.empty())
      return expectedError("a string");
    if (!tok_.is(TokenKind::Minus) && !tok_.is(TokenKind::Integer) &&
        !tok_.is(TokenKind::Float) && !tok_.isKeyword("inf") &&
        !tok_.isKeyword("nan"))
      return expectedError("a number or a string");
    Literal literal;
    if (auto err = parseLiteral(literal))
      return err;
    numbers.push_back(literal);
  } while (consumeIf(TokenKind::Comma));
  if (auto err = expect(TokenKind::RSquare, "']'"))
    return err;

  if (!strings.empty()) {
    value = std::move(strings);
    return llvm::Error::success();
  }
  bool anyFloat = llvm::any_of(
      numbers, [](const Literal &l) { return l.kind == Literal::Float; });
  if (!anyFloat) {
    std::vector<int64_t> ints;
    ints.reserve(numbers.size());
    for (const Literal &literal : numbers) {
      llvm::Expected<int64_t> intValue = toInt(literal);
      if (!intValue)
        return intValue.takeError();
      ints.push_back(*intValue);
    }
    value = std::move(ints);
    return llvm::Error::success();
  }
  std::vector<float> floats;
  floats.reserve(numbers.size());
  for (const Literal &literal : numbers) {
    llvm::Expected<float> floatValue = toFloat(literal);
    if (!floatValue)
      return floatValue.takeError();
    floats.push_back(*floatValue);
  }
  value = std::move(floats);
  return llvm::Error::success();
}

//===--- Literals and tensors ---------------------------------------------===//

llvm::Error Parser::parseLiteral(Literal &literal) {
  literal = Literal();
  literal.token = tok_;
  if (tok_.isKeyword("true") || tok_.isKeyword("false")) {
    literal.kind = Literal::Bool;
    literal.boolValue = tok_.text == "true";
    literal.text = tok_.text;
    advance();
    return llvm::Error::success();
  }
  if (tok_.is(TokenKind::Minus)) {
    literal.negative = true;
    advance();
  }
  if (tok_.is(TokenKind::Integer)) {
    literal.kind = Literal::Int;
  } else if (tok_.is(TokenKind::Float) || tok_.isKeyword("inf") ||
             tok_.isKeyword("nan")) {
    literal.kind = Literal::Float;
  } else {
    return expectedError("a number");
  }
  literal.text = tok_.text;
  advance();
  return llvm::Error::success();
}

llvm::Expected<int64_t> Parser::toInt(const Literal &literal) const {
  assert(literal.kind == Literal::Int);
  uint64_t magnitude;
  bool failed = literal.text.getAsInteger(10, magnitude);
  uint64_t limit = uint64_t(std::numeric_limits<int64_t>::max()) +
                   (literal.negative ? 1 : 0);
  if (failed || magnitude > limit)
    return errorAt(literal.token, "integer '" + literal.spelling() +
                                      "' does not fit in 64 bits");
  if (!literal.negative)
    return static_cast<int64_t>(magnitude);
  // Negate in unsigned arithmetic so that -2^63 does not overflow.
  return static_cast<int64_t>(0 - magnitude);
}

llvm::Expected<float> Parser::toFloat(const Literal &literal) const {
  assert(literal.kind != Literal::Bool);
  float value;
  if (!convertFloat(literal.text, value))
    return errorAt(literal.token, "value '" + literal.spelling() +
                                      "' is out of range for f32");
  return literal.negative ? -value : value;
}

template <typename T> void storeElement(uint8_t *out, T value) {
  std::memcpy(out, &value, sizeof(T));
}

llvm::Error Parser::encodeElement(DType dtype, const Literal &literal,
                                  uint8_t *out) const {
  llvm::StringRef name = dtypeName(dtype);
  if (dtype == DType::Bool) {
    if (literal.kind == Literal::Bool) {
      *out = literal.boolValue ? 1 : 0;
      return llvm::Error::success();
    }
    if (literal.kind == Literal::Int && !literal.negative &&
        (literal.text == "0" || literal.text == "1")) {
      *out = literal.text == "1" ? 1 : 0;
      return llvm::Error::success();
    }
    return errorAt(literal.token,
                   "expected true or false for bool but found '" +
                       literal.spelling() + "'");
  }
  if (literal.kind == Literal::Bool)
    return errorAt(literal.token, "expected a number for " + name +
                                      " but found '" + literal.spelling() +
                                      "'");
  if (dtype == DType::F64) {
    double value;
    if (!convertFloat(literal.text, value))
      return errorAt(literal.token, "value '" + literal.spelling() +
                                        "' is out of range for f64");
    storeElement(out, literal.negative ? -value : value);
    return llvm::Error::success();
  }
  if (isFloat(dtype)) {
    float value;
    if (!convertFloat(literal.text, value))
      return errorAt(literal.token, "value '" + literal.spelling() +
                                        "' is out of range for " + name);
    if (literal.negative)
      value = -value;
    if (dtype == DType::F32) {
      storeElement(out, value);
      return llvm::Error::success();
    }
    uint16_t bits =
        dtype == DType::F16 ? floatToHalf(value) : floatToBFloat16(value);
    float back =
        dtype == DType::F16 ? halfToFloat(bits) : bfloat16ToFloat(bits);
    if (std::isinf(back) && !std::isinf(value))
      return errorAt(literal.token, "value '" + literal.spelling() +
                                        "' is out of range for " + name);
    storeElement(out, bits);
    return llvm::Error::success();
  }

  assert(isInteger(dtype));
  if (literal.kind != Literal::Int)
    return errorAt(literal.token, "expected an integer for " + name +
                                      " but found '" + literal.spelling() +
                                      "'");
  llvm::Expected<int64_t> value = toInt(literal);
  if (!value)
    return value.takeError();
  auto outOfRange = [&] {
    return errorAt(literal.token, "value " + literal.spelling() +
                                      " is out of range for " + name);
  };
  switch (dtype) {
  case DType::I64:
    storeElement(out, *value);
    break;
  case DType::I32:
    if (*value < std::numeric_limits<int32_t>::min() ||
        *value > std::numeric_limits<int32_t>::max())
      return outOfRange();
    storeElement(out, static_cast<int32_t>(*value));
    break;
  case DType::I8:
    if (*value < -128 || *value > 127)
      return outOfRange();
    storeElement(out, static_cast<int8_t>(*value));
    break;
  case DType::U8:
    if (*value < 0 || *value > 255)
      return outOfRange();
    storeElement(out, static_cast<uint8_t>(*value));
    break;
  default:
    assert(false && "unhandled integer dtype");
  }
  return llvm::Error::success();
}

llvm::Error Parser::parseDense(TensorDataPtr &data) {
  if (!tok_.isKeyword("dense"))
    return expectedError("'dense'");
  advance();
  if (auto err = expect(TokenKind::LAngle, "'<'"))
    return err;
  TensorType type;
  Token typeToken = tok_;
  if (auto err = parseType(type))
    return err;
  if (auto err = expect(TokenKind::Colon, "':'"))
    return err;

  // Every constant of a file counts towards one total (LoadBudget), charged
  // before its bytes are allocated (a splat costs nothing on disk).
  auto charge = [&]() -> llvm::Error {
    if (auto err = chargeLoadAllocation(type, "constant"))
      return errorAt(typeToken, errorToString(std::move(err)));
    return llvm::Error::success();
  };
  DType dtype = type.getDType();
  int64_t count = type.getNumElements();
  size_t elementSize = dtypeSize(dtype);
  std::vector<uint8_t> bytes;

  if (tok_.is(TokenKind::String)) {
    // Raw little-endian bytes: "0x0000803F...".
    Token hexToken = tok_;
    llvm::StringRef hex = unquote(tok_.text, saver_);
    if (!hex.startswith("0x") && !hex.startswith("0X"))
      return errorAt(hexToken, "expected tensor values or a \"0x...\" string");
    hex = hex.drop_front(2);
    uint64_t byteSize = type.getByteSize();
    if (hex.size() % 2 != 0 || hex.size() / 2 != byteSize)
      return errorAt(hexToken, "hex data has " + llvm::Twine(hex.size() / 2) +
                                   " bytes but " + type.str() + " needs " +
                                   llvm::Twine(byteSize));
    if (auto err = charge())
      return err;
    bytes.resize(byteSize);
    for (size_t i = 0; i < byteSize; ++i) {
      char high = hex[2 * i], low = hex[2 * i + 1];
      if (!llvm::isHexDigit(high) || !llvm::isHexDigit(low))
        return errorAt(hexToken, "invalid hex digit in tensor data");
      bytes[i] = llvm::hexFromNibbles(high, low);
    }
    advance();
  } else if (tok_.is(TokenKind::LSquare)) {
    // Grow with the elements read, so that a huge type with a short list is
    // a count error rather than a huge allocation.
    Token listToken = tok_;
    advance();
    int64_t found = 0;
    if (!tok_.is(TokenKind::RSquare)) {
      do {
        Literal literal;
        if (auto err = parseLiteral(literal))
          return err;
        if (found < count) {
          bytes.resize(bytes.size() + elementSize);
          if (auto err = encodeElement(dtype, literal,
                                       bytes.data() + found * elementSize))
            return err;
        }
        ++found;
      } while (consumeIf(TokenKind::Comma));
    }
    if (auto err = expect(TokenKind::RSquare, "']'"))
      return err;
    if (found != count)
      return errorAt(listToken, "expected " + llvm::Twine(count) +
                                    " elements for " + type.str() +
                                    " but found " + llvm::Twine(found));
    if (auto err = charge())
      return err;
  } else {
    // A scalar fills every element (splat).
    Literal literal;
    if (auto err = parseLiteral(literal))
      return err;
    uint8_t element[8];
    if (auto err = encodeElement(dtype, literal, element))
      return err;
    if (type.getByteSize() > kMaxSplatBytes)
      return errorAt(literal.token, "splat tensor " + type.str() +
                                        " is larger than " +
                                        llvm::Twine(kMaxSplatBytes) + " bytes");
    if (auto err = charge())
      return err;
    bytes.resize(static_cast<size_t>(type.getByteSize()));
    for (int64_t i = 0; i < count; ++i)
      std::memcpy(bytes.data() + i * elementSize, element, elementSize);
  }
  if (auto err = expect(TokenKind::RAngle, "'>'"))
    return err;
  data = std::make_shared<TensorData>(std::move(type), std::move(bytes));
  return llvm::Error::success();
}

} // namespace

llvm::Expected<std::unique_ptr<Graph>>
ir::parseGraph(llvm::StringRef text, llvm::StringRef sourceName,
               unsigned lineOffset) {
  ir::LoadBudget budget;
  Parser parser(text, sourceName, lineOffset);
  return parser.parse();
}
