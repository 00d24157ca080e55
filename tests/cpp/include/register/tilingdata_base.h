// Stand-in for CANN's register/tilingdata_base.h (tests only): the macros that declare an AscendC host
// tiling-data class. Written from the macro names, parameters and usage in the CANN "TilingData structure
// definition" and "TilingData structure registration" documentation; no vendor code is copied.
//
//   BEGIN_TILING_DATA_DEF(Name)            a class Name deriving from TilingDef
//   TILING_DATA_FIELD_DEF(type, field);    `void set_field(type)` and `type get_field() const`
//   END_TILING_DATA_DEF;                   the end of the class
//   REGISTER_TILING_DATA_CLASS(Op, Name)   binds Name to the operator type Op (no trailing semicolon needed)
//
// TilingDef has SaveToBuffer(void *, size_t) and GetDataSize(), as on the real base class (fields packed in
// declaration order here; the real class also aligns them). A field's type must be one of the types the
// documentation allows (int8_t .. uint64_t, float). In addition the stand-in counts, per object and per field,
// how often the setter was called: Report(out) prints "<field> <value> <calls>" per field in declaration order
// and returns how many fields were not set exactly once (naming each on stderr), so a test can run an emitted
// fragment and see every field set once with its value. SaveToBuffer keeps those rows too
// (tiler_standin::saved(), one list per call), so a test sees what a host tiling function saved from a local
// object; REGISTER_TILING_DATA_CLASS calls are listed by tiler_standin::registered().
#ifndef TILER_STANDIN_REGISTER_TILINGDATA_BASE_H
#define TILER_STANDIN_REGISTER_TILINGDATA_BASE_H

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace tiler_standin {

class FieldBase {
public:
    explicit FieldBase(const char *name) : name_(name) {}
    virtual ~FieldBase() = default;
    const char *Name() const { return name_; }
    int Calls() const { return calls_; }
    virtual std::size_t Size() const = 0;
    virtual void Write(unsigned char *out) const = 0;
    virtual std::string Text() const = 0;

protected:
    const char *name_;
    int calls_ = 0;
};

// One field of a tiling-data object: its name, its value as text and how often its setter was called.
struct FieldRow {
    std::string name, value;
    int calls;
};

// Prints "<field> <value> <calls>" per row to `out`; returns how many fields were not set exactly once (each
// named on stderr).
inline int ReportRows(const std::vector<FieldRow> &rows, std::FILE *out) {
    int bad = 0;
    for (const FieldRow &r : rows) {
        std::fprintf(out, "%s %s %d\n", r.name.c_str(), r.value.c_str(), r.calls);
        if (r.calls != 1) {
            std::fprintf(stderr, "tiling field %s set %d times (want exactly once)\n", r.name.c_str(), r.calls);
            ++bad;
        }
    }
    return bad;
}

// The fields of every object passed through SaveToBuffer, in order: what a host tiling function handed over.
inline std::vector<std::vector<FieldRow>> &saved() {
    static std::vector<std::vector<FieldRow>> list;
    return list;
}

class TilingDef {
public:
    TilingDef() = default;
    TilingDef(const TilingDef &) = delete;  // the fields register themselves with their object
    TilingDef &operator=(const TilingDef &) = delete;
    virtual ~TilingDef() = default;

    void Add(FieldBase *field) { fields_.push_back(field); }

    std::size_t GetDataSize() const {
        std::size_t n = 0;
        for (const FieldBase *f : fields_) n += f->Size();
        return n;
    }

    void SaveToBuffer(void *data, std::size_t capacity) const {
        if (GetDataSize() > capacity) {
            std::fprintf(stderr, "SaveToBuffer: %zu bytes of tiling data, capacity %zu\n", GetDataSize(), capacity);
            std::abort();
        }
        auto *out = static_cast<unsigned char *>(data);
        for (const FieldBase *f : fields_) {
            f->Write(out);
            out += f->Size();
        }
        saved().push_back(Rows());
    }

    std::vector<FieldRow> Rows() const {
        std::vector<FieldRow> rows;
        for (const FieldBase *f : fields_) rows.push_back({f->Name(), f->Text(), f->Calls()});
        return rows;
    }

    int Report(std::FILE *out) const { return ReportRows(Rows(), out); }

private:
    std::vector<FieldBase *> fields_;
};

template <class T>
class Field final : public FieldBase {
    static_assert(std::is_same_v<T, std::int8_t> || std::is_same_v<T, std::uint8_t> ||
                      std::is_same_v<T, std::int16_t> || std::is_same_v<T, std::uint16_t> ||
                      std::is_same_v<T, std::int32_t> || std::is_same_v<T, std::uint32_t> ||
                      std::is_same_v<T, std::int64_t> || std::is_same_v<T, std::uint64_t> ||
                      std::is_same_v<T, float>,
                  "TILING_DATA_FIELD_DEF: the type must be int8_t .. uint64_t or float");

public:
    Field(TilingDef *owner, const char *name) : FieldBase(name) { owner->Add(this); }
    void Set(T value) {
        value_ = value;
        ++calls_;
    }
    T Get() const { return value_; }
    std::size_t Size() const override { return sizeof(T); }
    void Write(unsigned char *out) const override { std::memcpy(out, &value_, sizeof(T)); }
    std::string Text() const override {
        if constexpr (std::is_floating_point_v<T>) {
            char buf[32];
            std::snprintf(buf, sizeof(buf), "%.9g", static_cast<double>(value_));
            return buf;
        } else {
            return std::to_string(value_);
        }
    }

private:
    T value_{};
};

// (operator type, class name) of every REGISTER_TILING_DATA_CLASS in the program, in registration order.
inline std::vector<std::pair<const char *, const char *>> &registered() {
    static std::vector<std::pair<const char *, const char *>> list;
    return list;
}

struct Registration {
    Registration(const char *op_type, const char *class_name) { registered().emplace_back(op_type, class_name); }
};

}  // namespace tiler_standin

#define BEGIN_TILING_DATA_DEF(class_name) \
    class class_name : public ::tiler_standin::TilingDef { \
    public:

#define TILING_DATA_FIELD_DEF(data_type, field_name) \
    void set_##field_name(data_type value) { field_name##_.Set(value); } \
    data_type get_##field_name() const { return field_name##_.Get(); } \
    ::tiler_standin::Field<data_type> field_name##_{this, #field_name}

#define END_TILING_DATA_DEF }

#define REGISTER_TILING_DATA_CLASS(op_type, class_name) \
    static_assert(std::is_base_of_v<::tiler_standin::TilingDef, class_name>, \
                  "REGISTER_TILING_DATA_CLASS: " #class_name " is not declared by BEGIN_TILING_DATA_DEF"); \
    inline const ::tiler_standin::Registration tiler_registration_##op_type##_##class_name{#op_type, #class_name};

#endif  // TILER_STANDIN_REGISTER_TILINGDATA_BASE_H
