//===- ModelLoader.cpp - read and validate an ONNX model -----------------===//
//
// Everything that can be wrong with a file before its graph is imported:
// bytes that are not a model, a model ONNX's checker rejects, an opset we do
// not import, external data that points outside the model's folder or past
// the end of its file, dynamic input shapes, and shape-inference failures.
//
//===----------------------------------------------------------------------===//
#include "frontends/onnx/ModelLoader.h"
#include "frontends/onnx/HostTensor.h"

#include "onnx/checker.h"
#include "onnx/defs/parser.h"
#include "onnx/shape_inference/implementation.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <climits>
#include <map>
#include <optional>
#include <set>

namespace dsc::onnx_import {


static llvm::Error err(const std::string &path, const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 path + ": " + msg.str());
}

static bool looksTextual(const std::string &path, llvm::StringRef bytes) {
  llvm::StringRef ext = llvm::sys::path::extension(path);
  if (ext == ".onnxtxt" || ext == ".txt")
    return true;
  llvm::StringRef head = bytes.ltrim();
  return head.starts_with("<") || head.starts_with("#");
}

/// Confines an external-data location to the model's folder: relative, no
/// `..`, and after resolving symlinks still inside it.
static llvm::Expected<std::string>
resolveExternal(const LoadedModel &m, const std::string &tensor,
                const std::string &location) {
  auto bad = [&](const llvm::Twine &why) {
    return err(m.path, "initializer '" + tensor + "': external data location '" +
                           location + "' " + why);
  };
  if (location.empty())
    return bad("is empty");
  if (llvm::sys::path::is_absolute(location) || location[0] == '/' ||
      location[0] == '\\')
    return bad("is absolute; it must be relative to the model's folder");
  for (auto it = llvm::sys::path::begin(location),
            end = llvm::sys::path::end(location);
       it != end; ++it)
    if (*it == "..")
      return bad("contains '..'; it must stay inside the model's folder");
  llvm::SmallString<256> joined(m.directory);
  llvm::sys::path::append(joined, location);
  llvm::SmallString<256> real;
  if (llvm::sys::fs::real_path(joined, real))
    return bad("does not name a readable file (looked for '" + joined + "')");
  llvm::StringRef dir(m.directory);
  if (!llvm::StringRef(real).starts_with(dir) || real.size() <= dir.size() ||
      !llvm::sys::path::is_separator(real[dir.size()]))
    return bad("resolves through a symlink to '" + real +
               "', outside the model's folder '" + m.directory + "'");
  if (!llvm::sys::fs::is_regular_file(real))
    return bad("is not a regular file");
  return std::string(real);
}

/// Initializer shapes must have a representable element count before the
/// checker sees them: its own count wraps around silently.
static llvm::Error validateInitializerShapes(const LoadedModel &m) {
  for (const auto &t : m.model.graph().initializer()) {
    std::vector<int64_t> dims(t.dims().begin(), t.dims().end());
    auto count = checkedNumElements(dims);
    int64_t bytes = 0;
    if (!count)
      return err(m.path, "initializer '" + t.name() + "': " + describeBadShape(dims));
    if (__builtin_mul_overflow(*count, std::max<int64_t>(1, dtypeBytes(t.data_type())), &bytes))
      return err(m.path, "initializer '" + t.name() +
                             "': dimension product overflows 64 bits in bytes");
  }
  return llvm::Error::success();
}

static llvm::Error validateExternalData(LoadedModel &m) {
  for (const auto &t : m.model.graph().initializer()) {
    if (t.data_location() != onnx::TensorProto::EXTERNAL)
      continue;
    std::string location;
    int64_t offset = 0, length = -1;
    for (const auto &kv : t.external_data()) {
      auto number = [&](int64_t &out) -> bool {
        llvm::StringRef s(kv.value());
        unsigned long long v;
        if (s.getAsInteger(10, v) || v > (unsigned long long)LLONG_MAX)
          return false;
        out = (int64_t)v;
        return true;
      };
      if (kv.key() == "location")
        location = kv.value();
      else if ((kv.key() == "offset" && !number(offset)) ||
               (kv.key() == "length" && !number(length)))
        return err(m.path, "initializer '" + t.name() + "': external data " +
                               kv.key() + " '" + kv.value() +
                               "' is not a non-negative integer");
    }
    auto file = resolveExternal(m, t.name(), location);
    if (!file)
      return file.takeError();
    uint64_t fileSize = 0;
    llvm::sys::fs::file_size(*file, fileSize);
    // validateInitializerShapes ran first: the byte size cannot overflow.
    std::vector<int64_t> dims(t.dims().begin(), t.dims().end());
    int64_t need = *checkedNumElements(dims) * dtypeBytes(t.data_type());
    if (length < 0)
      length = need;
    int64_t end = 0;
    if (__builtin_add_overflow(offset, length, &end) || end > (int64_t)fileSize)
      return err(m.path, "initializer '" + t.name() + "': external data [" +
                             llvm::Twine(offset) + ", " + llvm::Twine(offset) +
                             " + " + llvm::Twine(length) + ") exceeds '" +
                             location + "' of " + llvm::Twine(fileSize) + " bytes");
    if (length != need)
      return err(m.path, "initializer '" + t.name() + "': external data has " +
                             llvm::Twine(length) + " bytes but its shape and type need " +
                             llvm::Twine(need));
    m.external[t.name()] = {*file, offset, length};
  }
  return llvm::Error::success();
}

/// Replaces `t`'s external data reference with its bytes.
static llvm::Error inlineExternal(const LoadedModel &m, onnx::TensorProto &t,
                                  const LoadedModel::ExternalRange &range) {
  auto bytes = readExternal(range);
  if (!bytes)
    return err(m.path, "initializer '" + t.name() + "': " + llvm::toString(bytes.takeError()));
  t.set_raw_data(std::move(*bytes));
  t.clear_external_data();
  t.clear_data_location();
  return llvm::Error::success();
}

/// A file without its weights (kNoWeightsKey): each name must be a graph
/// input of a floating-point type and a static shape that no initializer
/// holds. Reads them into m.weightless.
static llvm::Error readNoWeights(LoadedModel &m, const ImportOptions &o) {
  const onnx::GraphProto &graph = m.model.graph();
  auto listed = readNameList(m, kNoWeightsKey, "graph input names");
  if (!listed)
    return listed.takeError();
  if (auto &names = *listed) {
    std::set<std::string> initializers;
    for (const auto &t : graph.initializer())
      initializers.insert(t.name());
    for (const std::string &n : *names) {
      auto bad = [&](const llvm::Twine &why) {
        return err(m.path, "metadata '" + llvm::Twine(kNoWeightsKey) + "' names '" + n +
                               "', " + why + "; it lists the graph inputs that are the "
                               "model's parameters (models/*.py --no-weights)");
      };
      if (initializers.count(n))
        return bad("which is an initializer: the file holds its value");
      if (o.inputShapes.count(n))
        return bad("which --input-shape also names: a parameter's shape is the file's");
      const onnx::ValueInfoProto *in = nullptr;
      for (const auto &i : graph.input())
        if (i.name() == n)
          in = &i;
      if (!in)
        return bad("which is not a graph input");
      const auto &tt = in->type().tensor_type();
      if (!in->type().has_tensor_type() || !isFloatDType(tt.elem_type()))
        return bad("which is not a floating-point tensor (only parameters are left out)");
      if (!tt.has_shape())
        return bad("which has no shape");
      for (const auto &d : tt.shape().dim())
        if (!d.has_dim_value() || d.dim_value() <= 0)
          return bad("whose shape is not static");
    }
    m.weightless = std::move(*names);
  }
  return llvm::Error::success();
}

/// Gives each weightless input (m.weightless) of `model` an initializer of
/// its name, type and shape and no data: the importer then takes it as a
/// parameter, and dsrt --export-onnx fills it in. `asWritten` (the
/// skeleton): also takes it out of the graph inputs, and the metadata key
/// with it, so that the exported model is an ordinary one.
static void stubWeightless(const LoadedModel &m, onnx::ModelProto &model, bool asWritten) {
  if (m.weightless.empty())
    return;
  onnx::GraphProto &graph = *model.mutable_graph();
  google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> kept;
  for (const onnx::ValueInfoProto &in : graph.input()) {
    bool param = m.weightless.count(in.name());
    if (!param || !asWritten)
      *kept.Add() = in;
    if (!param)
      continue;
    onnx::TensorProto &t = *graph.add_initializer();
    t.set_name(in.name());
    t.set_data_type(in.type().tensor_type().elem_type());
    for (const auto &d : in.type().tensor_type().shape().dim())
      t.add_dims(d.dim_value());
  }
  graph.mutable_input()->Swap(&kept);
  if (asWritten) {
    auto *props = model.mutable_metadata_props();
    for (int k = props->size() - 1; k >= 0; --k)
      if (props->Get(k).key() == kNoWeightsKey)
        props->DeleteSubrange(k, 1);
  }
}

/// The model as the user wrote it, for dsrt --export-onnx to fill with the
/// trained weights: the initializers in `strip` keep their name, type and
/// shape but no data; other external tensors come inline so that the
/// skeleton needs no file beside it.
static llvm::Error makeSkeleton(LoadedModel &m, const std::set<std::string> &strip) {
  m.skeleton = std::make_unique<onnx::ModelProto>(m.model);
  for (auto &t : *m.skeleton->mutable_graph()->mutable_initializer()) {
    if (strip.count(t.name())) {
      std::string name = t.name();
      int32_t type = t.data_type();
      std::vector<int64_t> dims(t.dims().begin(), t.dims().end());
      t.Clear();
      t.set_name(name);
      t.set_data_type(type);
      for (int64_t d : dims)
        t.add_dims(d);
      continue;
    }
    auto it = m.external.find(t.name());
    if (it == m.external.end())
      continue;
    if (auto e = inlineExternal(m, t, it->second))
      return e;
  }
  stubWeightless(m, *m.skeleton, /*asWritten=*/true);
  return llvm::Error::success();
}

/// Integer and bool initializers are compile-time values that shape
/// inference and folding read: bring their external bytes inline.
static llvm::Error inlineSmallExternalData(LoadedModel &m) {
  for (auto &t : *m.model.mutable_graph()->mutable_initializer()) {
    auto it = m.external.find(t.name());
    if (it == m.external.end() || isFloatDType(t.data_type()))
      continue;
    if (auto e = inlineExternal(m, t, it->second))
      return e;
    m.external.erase(it);
  }
  return llvm::Error::success();
}

/// Runs ONNX's checker. It resolves external data against the working
/// directory, so external locations are pointed at the files validated
/// above (inside the model's folder) for the duration of the check.
static void checkModel(LoadedModel &m) {
  std::vector<std::pair<onnx::StringStringEntryProto *, std::string>> saved;
  for (auto &t : *m.model.mutable_graph()->mutable_initializer()) {
    auto it = m.external.find(t.name());
    if (it == m.external.end())
      continue;
    for (auto &kv : *t.mutable_external_data())
      if (kv.key() == "location") {
        saved.push_back({&kv, kv.value()});
        kv.set_value(it->second.file);
      }
  }
  struct Restore {
    decltype(saved) &entries;
    ~Restore() {
      for (auto &[kv, value] : entries)
        kv->set_value(value);
    }
  } restore{saved};
  onnx::checker::check_model(m.model);
}

llvm::Expected<std::string> readExternal(const LoadedModel::ExternalRange &r) {
  auto buf = llvm::MemoryBuffer::getFileSlice(r.file, r.length, r.offset);
  if (!buf)
    return llvm::createStringError(buf.getError(), "cannot read " + r.file);
  return std::string((*buf)->getBuffer());
}

static std::string dimsToString(const std::vector<int64_t> &dims) {
  std::string s;
  for (size_t k = 0; k < dims.size(); ++k)
    s += (k ? "x" : "") + std::to_string(dims[k]);
  return s;
}

/// Makes every graph input static, from the model or from the options.
static llvm::Error makeInputsStatic(LoadedModel &m, const ImportOptions &o) {
  auto *graph = m.model.mutable_graph();
  std::set<std::string> initializers;
  for (const auto &t : graph->initializer())
    initializers.insert(t.name());
  for (const auto &[name, _] : o.inputShapes) {
    bool found = false;
    for (const auto &in : graph->input())
      found |= in.name() == name;
    if (!found)
      return err(m.path, "--input-shape names '" + name +
                             "', which is not a graph input");
  }
  for (auto &in : *graph->mutable_input()) {
    if (initializers.count(in.name()))
      continue;
    if (!in.type().has_tensor_type())
      return err(m.path, "input '" + in.name() + "' is not a tensor");
    auto *shape = in.mutable_type()->mutable_tensor_type()->mutable_shape();
    if (auto it = o.inputShapes.find(in.name()); it != o.inputShapes.end()) {
      if (in.type().tensor_type().has_shape() &&
          shape->dim_size() != (int)it->second.size())
        return err(m.path, "--input-shape " + in.name() + "=" +
                               dimsToString(it->second) + " has rank " +
                               llvm::Twine(it->second.size()) + " but the input has rank " +
                               llvm::Twine(shape->dim_size()));
      shape->clear_dim();
      for (int64_t d : it->second)
        shape->add_dim()->set_dim_value(d);
    }
    if (!in.type().tensor_type().has_shape())
      return err(m.path, "input '" + in.name() +
                             "' has no shape; give it with --input-shape " +
                             in.name() + "=DxDx...");
    for (int k = 0; k < shape->dim_size(); ++k) {
      auto *dim = shape->mutable_dim(k);
      if (dim->has_dim_value() && dim->dim_value() > 0)
        continue;
      if (k == 0 && o.batchSize > 0) {
        dim->set_dim_value(o.batchSize);
        continue;
      }
      std::string what = dim->has_dim_param() ? " ('" + dim->dim_param() + "')" : "";
      return err(m.path, "input '" + in.name() + "' dimension " + llvm::Twine(k) +
                             what + " is dynamic; dsc compiles static shapes: " +
                             (k == 0 ? "fix the batch size with --batch-size=N, or "
                                     : "") +
                             "give the whole shape with --input-shape " + in.name() +
                             "=DxDx...");
    }
    std::vector<int64_t> dims;
    for (const auto &d : shape->dim())
      dims.push_back(d.dim_value());
    if (!checkedNumElements(dims))
      return err(m.path, "input '" + in.name() + "' shape " + dimsToString(dims) +
                             ": dimension product overflows 64 bits");
  }
  // Shapes recorded by the exporter for intermediate values may still be
  // symbolic; drop them and let shape inference recompute them statically.
  graph->clear_value_info();
  for (auto &out : *graph->mutable_output())
    if (out.type().has_tensor_type())
      out.mutable_type()->mutable_tensor_type()->clear_shape();
  return llvm::Error::success();
}

/// What ONNX 1.12's shape inference reads without checking (found by the
/// onnx_import fuzzer): LayerNormalization of a rank-0 input, or with an
/// axis outside [-rank, rank), reads out of bounds inside libonnx. Checked
/// here for the inputs whose rank is known before inference (graph inputs
/// and initializers); dsc's importer checks the rest after it.
llvm::Error checkBeforeShapeInference(const LoadedModel &m) {
  std::map<std::string, int64_t> ranks;
  for (const auto &in : m.model.graph().input())
    if (in.type().has_tensor_type() && in.type().tensor_type().has_shape())
      ranks[in.name()] = in.type().tensor_type().shape().dim_size();
  for (const auto &t : m.model.graph().initializer())
    ranks[t.name()] = t.dims_size();
  // Ranks also follow the ops that keep them (elementwise ops broadcast to
  // the largest operand rank), so that an intermediate input is checked too.
  static const std::set<std::string> unary = {
      "Identity", "Relu", "Gelu", "Tanh", "Sigmoid", "Erf", "Neg", "Abs", "Exp", "Log",
      "Sqrt", "Reciprocal", "Cast", "Dropout", "Softmax", "LogSoftmax", "LayerNormalization",
      "Elu", "Selu", "Celu", "Softplus", "LeakyRelu", "HardSigmoid", "HardSwish", "Softsign",
      "ThresholdedRelu"};
  static const std::set<std::string> binary = {"Add", "Sub", "Mul", "Div", "Pow", "Max",
                                               "Min", "Where"};
  for (int k = 0; k < m.model.graph().node_size(); ++k) {
    const auto &node = m.model.graph().node(k);
    const std::string &op = node.op_type();
    std::optional<int64_t> outRank;
    if (unary.count(op) && node.input_size() >= 1 && ranks.count(node.input(0))) {
      outRank = ranks[node.input(0)];
    } else if (binary.count(op) && node.input_size() >= 2) {
      int64_t r = 0;
      bool known = true;
      for (const auto &in : node.input())
        if (auto it = ranks.find(in); it != ranks.end())
          r = std::max(r, it->second);
        else
          known = false;
      if (known)
        outRank = r;
    }
    if (outRank && node.domain().empty())
      for (const auto &out : node.output())
        if (!out.empty())
          ranks[out] = *outRank;
    if (op != "LayerNormalization" || node.input_size() < 1)
      continue;
    auto it = ranks.find(node.input(0));
    if (it == ranks.end())
      continue;
    int64_t rank = it->second, axis = -1;
    for (const auto &a : node.attribute())
      if (a.name() == "axis")
        axis = a.i();
    if (rank < 1 || axis < -rank || axis >= rank)
      return err(m.path, (node.name().empty() ? "node #" + std::to_string(k)
                                              : "node '" + node.name() + "'") +
                             " (LayerNormalization): axis " +
                             llvm::Twine(axis) + " is out of range for its input '" +
                             node.input(0) + "' of rank " + llvm::Twine(rank));
  }
  return llvm::Error::success();
}

llvm::Expected<std::unique_ptr<LoadedModel>>
loadModel(const std::string &path, const ImportOptions &options,
          const std::set<std::string> *strip) {
  auto m = std::make_unique<LoadedModel>();
  m->path = path;
  // A FIFO or a device would block the read (or never end).
  llvm::sys::fs::file_status st;
  if (!llvm::sys::fs::status(path, st) && st.type() != llvm::sys::fs::file_type::regular_file)
    return err(path, "not a regular file (a FIFO, a device or a folder); give the model file");
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/true);
  if (!buffer)
    return err(path, "cannot open: " + buffer.getError().message());
  llvm::StringRef bytes = (*buffer)->getBuffer();
  if (bytes.empty())
    return err(path, "the file is empty");
  llvm::SmallString<256> dir(path);
  llvm::sys::path::remove_filename(dir);
  if (dir.empty())
    dir = ".";
  llvm::SmallString<256> realDir;
  if (llvm::sys::fs::real_path(dir, realDir))
    return err(path, "cannot resolve the model's folder");
  m->directory = std::string(realDir);

  if (looksTextual(path, bytes)) {
    // ONNX's parser throws on some malformed numbers (std::stof on "NaN"),
    // which would end dsc without a word.
    onnx::Common::Status status;
    try {
      status = onnx::OnnxParser::Parse(m->model, bytes.data());
    } catch (const std::exception &e) {
      return err(path, llvm::Twine("not valid textual ONNX: ") + e.what() +
                           " (a malformed number? textual ONNX has no NaN or infinity literal)");
    }
    if (!status.IsOK())
      return err(path, "not valid textual ONNX: " + status.ErrorMessage());
  } else {
    if (bytes.size() > (size_t)INT_MAX)
      return err(path, "larger than 2 GiB: protobuf cannot hold it; save the "
                       "weights as external data (onnx.save_model(..., "
                       "save_as_external_data=True))");
    if (!m->model.ParseFromArray(bytes.data(), (int)bytes.size()))
      return err(path, "not an ONNX model: the protobuf is truncated or "
                       "corrupt (" + llvm::Twine(bytes.size()) + " bytes)");
  }
  if (!m->model.has_graph() || m->model.graph().node_size() == 0)
    return err(path, "the model has no graph nodes (truncated or not an ONNX model)");

  bool hasDefaultOpset = false;
  for (const auto &op : m->model.opset_import())
    if (op.domain().empty() || op.domain() == "ai.onnx") {
      m->opset = op.version();
      hasDefaultOpset = true;
    }
  if (!hasDefaultOpset)
    return err(path, "the model has no opset_import for the default ONNX domain "
                     "(a truncated file, or not written by an ONNX exporter)");
  if (m->opset < kMinOpset || m->opset > kMaxOpset)
    return err(path, "opset " + llvm::Twine(m->opset) +
                         " is not supported: dsc imports opsets " +
                         llvm::Twine(kMinOpset) + "-" + llvm::Twine(kMaxOpset) +
                         (m->opset > kMaxOpset
                              ? "; export with torch.onnx.export(..., dynamo=True, opset_version=20), "
                                "or save a torch.export program (torch.export.save) as a .pt2"
                              : "; re-export with torch.onnx.export(..., opset_version=17)"));
  m->sourceOpset = m->opset;

  if (auto e = validateInitializerShapes(*m))
    return std::move(e);
  // External data is validated under stricter rules than the checker of
  // ONNX 1.12 applies (it follows '..' and symlinks), before the checker.
  if (auto e = validateExternalData(*m))
    return std::move(e);
  // Before the skeleton: dsrt --export-onnx writes the untied, bridged
  // model, so that each trained tensor has its own initializer.
  if (auto e = readExporterMetadata(*m))
    return std::move(e);
  if (auto e = inlineLocalFunctions(*m))
    return std::move(e);
  if (auto e = bridgeToOpset17(*m))
    return std::move(e);
  if (auto e = readNoWeights(*m, options))
    return std::move(e);
  if (strip)
    if (auto e = makeSkeleton(*m, *strip))
      return std::move(e);
  if (auto e = inlineSmallExternalData(*m))
    return std::move(e);

  try {
    checkModel(*m);
  } catch (const std::exception &e) {
    return err(path, "rejected by the ONNX checker: " + llvm::Twine(e.what()));
  }

  if (auto e = makeInputsStatic(*m, options))
    return std::move(e);
  if (auto e = checkBeforeShapeInference(*m))
    return std::move(e);

  try {
    onnx::ShapeInferenceOptions opts(/*check_type=*/true, /*strict_mode=*/1,
                                     /*data_prop=*/true);
    onnx::shape_inference::InferShapes(m->model, onnx::OpSchemaRegistry::Instance(),
                                       opts);
  } catch (const std::exception &e) {
    return err(path, "shape inference failed: " + llvm::Twine(e.what()));
  }
  // After the checker, which wants an initializer's data.
  stubWeightless(*m, m->model, /*asWritten=*/false);
  return std::move(m);
}

} // namespace dsc::onnx_import
